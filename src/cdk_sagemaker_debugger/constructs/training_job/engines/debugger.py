"""RuleEngine.DEBUGGER: SageMaker Debugger's ProfilerConfig and profiler rules, the debugger (tensor) rules with their
hook, TensorBoard output, rule images, uploaded rule sources and the execution role's grants for the rule actions.
The request is the one the SageMaker Python SDK sends, byte for byte."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets

from ....model.debugger_request import DebuggerRequest, render_debugger_request, resolve_debug_hook
from ....model.debugger_rules import CustomRule, Rule, RulePermissions
from ....model.distribution import DebuggerFeatures, check_debugger_compatibility, is_trainium
from ....model.errors import ConfigurationError, ConfigurationTypeError, UnsupportedRegionError
from ....model.images import DEBUGGER_UNSUPPORTED_REGIONS
from ....model.job_family import job_name_pattern
from ....model.metric_rules import MetricRule
from ....model.parameters import is_token
from ....model.profiler_config import ProfilerConfig, framework_profiling_deprecation
from ....model.profiler_rules import ProfilerRule
from ....model.request.training import example_job_name
from ....model.rule_engine import RuleEngine
from ....model.sample_counts import DEFAULT_INTERVAL_MS
from ..._cdk.checks import located
from ..._cdk.images import rule_image, rule_image_repository_arn
from ..._cdk.nag import acknowledge_wildcards
from ...rule_evaluator import RuleEvaluator
from ...sampler import DEFAULT_SAMPLER, Sampler
from .._shared import WARNING_PREFIX, ecr_repository_arns
from .base import RuleEngineBinding

__all__ = ["DebuggerBinding"]

# Stands in for the S3 URI of a local rule source while a rule is checked, before its asset exists.
_PENDING_SOURCE_URI = "s3://pending-upload/rule-source.py"


class DebuggerBinding(RuleEngineBinding):
    """SageMaker Debugger evaluates the rules: only for accounts that still have Debugger."""

    engine = RuleEngine.DEBUGGER

    def __init__(self, job: Any) -> None:
        super().__init__(job)
        self._rules: list[Rule] = []
        self._sources: dict[Rule, s3_assets.Asset] = {}
        self._permissions = RulePermissions()
        self._policy: iam.Policy | None = None
        self._granted_topic = False
        self._granted_endpoints: frozenset[tuple[str, str]] = frozenset()
        self._granted_stop_patterns: set[str] = set()
        #: Why the library switched the default profiler off (Trainium, a region without Debugger), if it did.
        self.profiler_off_reason: str | None = None

    # -- checks while the job is built -----------------------------------------------------------------------------
    def profiler(self, given: Any, instance_type: str) -> Any:
        """The given ProfilerConfig, or system monitoring on unless SageMaker cannot run it here (the SDK's behaviour):
        Debugger-less regions and Trainium instances get the profiler switched off, with a note, instead of a request
        the API rejects."""
        if given is not None:
            return given
        job = self._job
        reason = None
        if job._region in DEBUGGER_UNSUPPORTED_REGIONS:
            reason = f"SageMaker has no Debugger or profiler in {job._region}"
        elif is_trainium(instance_type):
            reason = f"the profiler does not support Trainium instances ({instance_type})"
        if reason is None:
            return ProfilerConfig()
        self.profiler_off_reason = reason
        cdk.Annotations.of(job).add_info(
            f"The profiler is switched off because {reason}. Pass profiler=ProfilerConfig(...) to decide yourself."
        )
        return ProfilerConfig(disable_profiler=True)

    def check_rule_set(self, rule_set: Any) -> None:
        if rule_set is not None:
            rule_set.require_rule_images()  # Debugger's rule containers must exist in this region

    def check_profiler_features(self) -> None:
        job = self._job
        profiler_off = self._profiler_rules_problem()
        if profiler_off is not None:
            raise ConfigurationError(profiler_off, where=job._where, field="profiler")
        if job.profiler.framework_profile is not None:
            message = framework_profiling_deprecation(job.framework)
            if message:
                cdk.Annotations.of(job).add_warning_v2(f"{WARNING_PREFIX}:frameworkProfilingDeprecated", message)

    def sampler(self, sampler: Sampler) -> Sampler | None:
        """Debugger profiles with its own profiler: no sampler (one asked for explicitly is an error)."""
        if sampler is not DEFAULT_SAMPLER:
            raise ConfigurationError(
                "RuleEngine.DEBUGGER profiles with Debugger's own profiler, which writes the same profiler-output/ "
                "files. Pass sampler=None with Debugger, or use the default RuleEngine.EVALUATOR with the sampler.",
                where=self._job._where, field="sampler", value=sampler)
        return None

    def sampling_interval_ms(self) -> int | None:
        """Debugger's profiler's interval (its default when not set); None with the profiler off."""
        if self._job.profiler.disable_profiler:
            return None
        return self._job.profiler.profiling_interval_millis or DEFAULT_INTERVAL_MS

    def check_metric_rule(self, rule: MetricRule) -> None:
        raise rule.debugger_error(where=self._job._where)  # type: ignore[arg-type]

    def check_health_rule(self, rule: ProfilerRule) -> None:
        raise rule.debugger_error(where=self._job._where)  # type: ignore[attr-defined]

    def _profiler_rules_problem(self) -> str | None:
        """Debugger's profiler rules with Debugger's profiler off, or None: checked when the job is created and again
        at synth, for rules added to the set later."""
        job = self._job
        if not job.profiler.disable_profiler or job.rule_set is None or not job.rule_set.rules:
            return None
        names = [r.name for r in job.rule_set.rules]
        if self.profiler_off_reason is not None:  # the library switched it off, not the user
            return (
                f"profiler rules {names} need the profiler, which is off for this job because "
                f"{self.profiler_off_reason} (SageMaker would refuse the job with it on). Use the default "
                "rule_engine=RuleEngine.EVALUATOR, whose sampler and evaluator need no Debugger, or remove rule_set."
            )
        return (
            f"profiler rules {names} need the profiler, but ProfilerConfig(disable_profiler=True) turns it off. "
            "Remove the rules or enable the profiler."
        )

    def problems(self) -> list[str]:
        problems: list[str] = []
        profiler_off = self._profiler_rules_problem()  # rules added after construction
        if profiler_off is not None:
            problems.append(profiler_off)
        try:
            self._compatibility(self._rules)
        except ConfigurationError as error:
            problems.append(str(error))
        return problems

    # -- debugger rules ------------------------------------------------------------------------------------------------
    @property
    def debugger_rules(self) -> tuple[Rule, ...]:
        return tuple(self._rules)

    @property
    def debugger_rule_list(self) -> Sequence[Rule]:
        return self._rules

    @property
    def debugger_rule_source_assets(self) -> tuple[s3_assets.Asset, ...]:
        return tuple(self._sources.values())

    @property
    def rule_actions_policy(self) -> iam.Policy | None:
        return self._policy

    def add_initial_debugger_rules(self, rules: Sequence[Rule]) -> None:
        """The constructor's rules through the guard rails; uploads their local sources."""
        self._permissions = self._check(rules).permissions
        self._rules.extend(rules)
        for rule in self._rules:
            self._upload_source(rule)

    def add_debugger_rule(self, rule: Rule) -> Rule:
        checked = self._check([*self._rules, rule])
        self._rules.append(rule)
        self._upload_source(rule)
        self._grant_rule_needs([rule], checked.permissions)
        return rule

    def _check(self, rules: Sequence[Rule]) -> DebuggerRequest:
        """Render the Debugger members for ``rules`` and run the guard rails. Raises before anything changes; on
        success records the warnings as annotations."""
        checked = self._render(rules)
        compatibility = self._compatibility(rules)
        for message in checked.warnings:
            self._job._warn("debuggerConfiguration", message)
        for message in compatibility:
            self._job._warn("debuggerCompatibility", message)
        return checked

    def _compatibility(self, rules: Sequence[Rule]) -> list[str]:
        job = self._job
        profile = job.profiler.framework_profile
        features = DebuggerFeatures(
            system_monitoring=not job.profiler.disable_profiler,
            framework_profiling=profile is not None,
            profiles_collectives=profile is not None and profile.profiles_collectives,
            profiler_rules=job.rule_set is not None and bool(job.rule_set.rules),
            tensor_debugging=resolve_debug_hook(job.debug_hook_setting, bool(rules)) is not None,
        )
        try:
            return check_debugger_compatibility(
                features=features, distribution=job.distribution, framework=job.framework,
                instance_type=job.instance_type, instance_count=job.instance_count,
                checkpointing=job.checkpoint_s3_uri is not None, region=job._region, where=job._where,
            )
        except UnsupportedRegionError as error:
            raise UnsupportedRegionError(
                f"{error.reason} This job uses {_features_in_use(features)}.",
                where=error.where, field=error.field, value=error.value,
            ) from None

    def _render(self, rules: Sequence[Rule], *, job_name: str | None = None) -> DebuggerRequest:
        """The Debugger members; StopTraining and StalledTrainingRule get the run's name (``job_name``, by default the
        example name the state machine replaces with the execution's)."""
        job = self._job
        return render_debugger_request(
            rules=rules,
            debug_hook=job.debug_hook_setting,
            tensorboard=job.tensorboard,
            default_s3_output_path=job.output_s3_uri,
            job_name_prefix=job.job_name_prefix,
            job_name=job_name or example_job_name(job.job_name_prefix),
            region=job._region,
            image_for=self._rule_image,
            source_uri_for=self._source_uri,
            framework=job.framework,
            where=job._where,
        )

    def _rule_image(self, rule: Rule) -> str:
        if rule.image_uri is not None:
            return rule.image_uri
        return located(self._job, lambda: rule_image(self._job._stack, custom=rule.is_custom))

    def _source_uri(self, rule: Rule) -> str | None:
        asset = self._sources.get(rule)
        if asset is not None:
            return asset.s3_object_url
        return _PENDING_SOURCE_URI if isinstance(rule, CustomRule) and rule.has_local_source else None

    def _upload_source(self, rule: Rule) -> None:
        if isinstance(rule, CustomRule) and rule.has_local_source:
            asset_id = f"DebuggerRuleSource{len(self._sources)}"
            self._sources[rule] = s3_assets.Asset(self._job, asset_id, path=rule.source)  # type: ignore[arg-type]

    # -- the request ---------------------------------------------------------------------------------------------------
    def request(self, channels: list[dict[str, Any]], environment: Mapping[str, str] | None, *,
                job_name: str | None) -> tuple[list[dict[str, Any]], Mapping[str, str] | None, dict[str, Any]]:
        """Debugger's members: the hook, the debugger rules, TensorBoard, ProfilerConfig and the profiler rules."""
        job = self._job
        members = {
            **self._render(self._rules, job_name=job_name).fragment,
            "ProfilerConfig": job.profiler.to_request(job.profiler_s3_uri),
            "ProfilerRuleConfigurations": job.rule_set.render() if job.rule_set is not None else [],
        }
        return channels, environment, members

    # -- grants ---------------------------------------------------------------------------------------------------------
    def written_locations(self) -> list[tuple[str | None, str]]:
        job = self._job
        hook = job.debug_hook
        return [(hook.s3_output_path if hook is not None else None, "debugger hook output"),
                (job.tensorboard.s3_output_path if job.tensorboard is not None else None, "TensorBoard output")]

    def bind_rule_set(self) -> None:
        rule_set = self._job.rule_set
        if rule_set is not None:
            rule_set.on_rule_added(lambda rule: self._grant_profiler_rule(rule_set, rule))

    def _grant_profiler_rule(self, rule_set: Any, rule: ProfilerRule) -> None:
        """What the execution role needs to run ``rule``: its evaluator image and, for a custom rule, its source."""
        policy = self._job._policy
        repository = rule_set.image_repository_arn(rule)
        if repository is not None:
            policy.allow_image_pull([repository])
        source = rule_set.source_object_arn(rule)
        if source is not None:
            policy.allow({"Effect": "Allow", "Action": "s3:GetObject", "Resource": source})

    def grant_initial(self, policy: Any) -> None:
        self._grant_rule_needs(self._rules, self._permissions, with_actions=False)

    def grant_on_role(self, role: iam.Role) -> None:
        self._grant_rule_actions(role, self._permissions)
        if not self._granted_topic:
            self._deny_topic(role)

    #: The id of the policy that keeps the training code off the account-wide SMDebugRules topic.
    TOPIC_DENY_ID = "DebuggerTopicDenyPolicy"

    def _deny_topic(self, role: iam.Role) -> None:
        """Without Email or SMS actions nothing of the job needs the account-wide SMDebugRules topic: deny it in
        every region, so that the training code cannot message (or subscribe to) other teams' Debugger notifications
        even when a broad policy is attached to the role later. Removed if a rule with such an action is added."""
        topic = self._job._arn("sns", RulePermissions.TOPIC_NAME).split(":")
        topic[3] = "*"
        iam.Policy(self._job, self.TOPIC_DENY_ID, roles=[role], statements=[iam.PolicyStatement(
            effect=iam.Effect.DENY, resources=[":".join(topic)],
            actions=["sns:Publish", "sns:Subscribe", "sns:CreateTopic", "sns:SetTopicAttributes", "sns:AddPermission",
                     "sns:DeleteTopic"])])

    def _rule_repositories(self, rules: Sequence[Rule]) -> list[str]:
        arns: list[str] = []
        for rule in rules:
            if rule.image_uri is None:
                arns.append(rule_image_repository_arn(self._job, custom=rule.is_custom))
            else:
                arns += ecr_repository_arns(self._job._partition, rule.image_uri)
        return arns

    def _grant_rule_needs(self, rules: Sequence[Rule], permissions: RulePermissions, *,
                          with_actions: bool = True) -> None:
        """What the rule containers of ``rules`` need from the execution role this construct created."""
        policy = self._job._policy
        if not policy.grants:
            return  # a role the user passed is used unchanged
        policy.allow_image_pull(self._rule_repositories(rules))
        wildcards: dict[str, str] = {}
        for rule in rules:
            asset = self._sources.get(rule)
            if asset is not None:
                policy.allow({"Effect": "Allow", "Action": "s3:GetObject",
                              "Resource": asset.bucket.arn_for_objects(asset.s3_object_key)})
            wildcards.update(policy.allow_s3_prefix(rule.s3_output_path, f"rule {rule.name!r} output", writable=True))
            for trial in rule.other_trials:
                wildcards.update(policy.allow_s3_prefix(trial, f"other trial of rule {rule.name!r}", writable=False))
        if wildcards:
            policy.acknowledge(wildcards)
        if with_actions and policy.owned_role is not None:
            self._grant_rule_actions(policy.owned_role, permissions)

    def _grant_rule_actions(self, role: iam.Role, permissions: RulePermissions) -> None:
        """What the rule container calls for the actions (docs: "Debugger rule actions and the execution role")."""
        statements: list[iam.PolicyStatement] = []
        findings: dict[str, str] = {}
        if permissions.notification_topic:
            statements += self._notification_statements(permissions, findings)
        statements += self._stop_statements(permissions, findings)
        if not statements:
            return
        if self._policy is None:
            self._policy = iam.Policy(self._job, "RuleActionsPolicy", roles=[role])
        self._policy.add_statements(*statements)
        if findings:
            acknowledge_wildcards(self._policy, findings)

    def _notification_statements(self, permissions: RulePermissions,
                                 findings: dict[str, str]) -> list[iam.PolicyStatement]:
        """Email and SMS: the container creates the account-wide SMDebugRules topic if needed (CreateTopic, whose
        failure fails the action), lists the subscriptions (ListSubscriptions; without it, it subscribes nobody),
        subscribes each endpoint with a filter policy, and publishes. Subscribe is allowed for the configured
        endpoints only, so the training code cannot subscribe an address of its own and read every team's messages."""
        statements: list[iam.PolicyStatement] = []
        topic = self._job._stack.format_arn(service="sns", resource=RulePermissions.TOPIC_NAME)
        if not self._granted_topic:
            self._granted_topic = True
            self._job.node.try_remove_child(self.TOPIC_DENY_ID)  # the rule container now publishes there
            cdk.Annotations.of(self._job).add_warning_v2(
                "cdk-sagemaker-debugger:debuggerNotificationsShareTheRole",
                "Email and SMS actions of debugger rules publish to the account-wide SNS topic SMDebugRules with the "
                "job's execution role, which the training code holds too: it could publish its own text to that topic "
                "(every team's Debugger subscribers read it). Prefer a RuleAlarm with Email/SMS actions (its own "
                "encrypted topic, fed by verdicts only), and keep the rules' actions to StopTraining.")
            statements.append(iam.PolicyStatement(actions=["sns:CreateTopic", "sns:Publish"], resources=[topic]))
            statements.append(iam.PolicyStatement(actions=["sns:ListSubscriptions"], resources=["*"]))
            findings["Resource::*"] = (
                "sns:ListSubscriptions has no resource-level permissions; the debugger rule container lists the "
                "subscriptions to subscribe each Email/SMS endpoint once (Subscribe itself is allowed only for the "
                "configured endpoints)."
            )
        new = [pair for pair in permissions.notification_endpoints if pair not in self._granted_endpoints]
        self._granted_endpoints = self._granted_endpoints | frozenset(new)
        for protocol in ("email", "sms"):
            # the container lowercases the whole action text, endpoints included
            endpoints = [e if is_token(e) else e.lower() for kind, e in new if kind == protocol]
            if endpoints:
                statements.append(iam.PolicyStatement(actions=["sns:Subscribe"], resources=[topic], conditions={
                    "StringEquals": {"sns:Protocol": protocol},
                    "StringEqualsIgnoreCase": {"sns:Endpoint": endpoints},
                }))
        return statements

    def _stop_statements(self, permissions: RulePermissions, findings: dict[str, str]) -> list[iam.PolicyStatement]:
        """StopTraining lists the in-progress jobs (ListTrainingJobs) and stops the one job it finds. The run's own
        StopTraining may stop ``<prefix>-*`` (never a sibling prefix's jobs); one with its own prefix, that prefix."""
        job = self._job
        run_name = example_job_name(job.job_name_prefix)
        names: dict[str, str] = {}  # resource-name pattern -> what it stops
        for prefix in permissions.stop_training_job_prefixes:
            if prefix == run_name:
                names[job_name_pattern(f"{job.job_name_prefix}-")] = ("this job's runs (the action names the run's "
                                                                      "exact job)")
            else:
                names[job_name_pattern(prefix)] = f"a running job whose name starts with {prefix!r}"
        new = {pattern: what for pattern, what in names.items() if pattern not in self._granted_stop_patterns}
        if not new:
            return []
        statements: list[iam.PolicyStatement] = []
        if not self._granted_stop_patterns:
            statements.append(iam.PolicyStatement(actions=["sagemaker:ListTrainingJobs"], resources=["*"]))
            reason = findings.get("Resource::*", "")
            findings["Resource::*"] = (reason + " " if reason else "") + (
                "sagemaker:ListTrainingJobs has no resource-level permissions; the debugger rule container lists "
                "in-progress jobs by name to find the one a StopTraining action stops."
            )
        self._granted_stop_patterns.update(new)
        arns = [job._arn("sagemaker", f"training-job/{pattern}") for pattern in new]
        statements.append(iam.PolicyStatement(actions=["sagemaker:StopTrainingJob"], resources=arns))
        for arn, what in zip(arns, new.values(), strict=True):
            findings[f"Resource::{arn}"] = (
                f"StopTraining actions of debugger rules stop {what}; job names get a random suffix per run, and no "
                "other job can be stopped."
            )
        return statements

    # -- the evaluator --------------------------------------------------------------------------------------------------
    def attach(self, evaluator: Any) -> Any:
        """Debugger evaluates the rules: a RuleEvaluator passed as ``evaluator=`` is refused."""
        if evaluator is not None:
            if not isinstance(evaluator, RuleEvaluator):
                raise ConfigurationTypeError(f"expected a RuleEvaluator, got {type(evaluator).__name__}.",
                                             where=self._job._where, field="evaluator", value=evaluator)
            raise ConfigurationError("with RuleEngine.DEBUGGER, Debugger evaluates the rules; remove evaluator= "
                                     "or use RuleEngine.EVALUATOR.", where=self._job._where, field="evaluator")
        return None

    def rule_report_location(self) -> str | None:
        return f"{self._job.rule_output_s3_uri}/<job>/rule-output/<Rule>/profiler-output/profiler-report.html"


def _features_in_use(features: DebuggerFeatures) -> str:
    used = []
    if features.system_monitoring:
        used.append("system monitoring (on unless profiler=ProfilerConfig(disable_profiler=True))")
    if features.framework_profiling:
        used.append("framework profiling")
    if features.profiler_rules:
        used.append("profiler rules")
    if features.tensor_debugging:
        used.append("the debugger hook/rules")
    return ", ".join(used)
