"""The construction steps of ProfiledTrainingJob, in the order its constructor runs them: each checks or records
props on the job, or creates what the next step reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from ...model.debug_hook import DebugHookConfig, TensorBoardOutputConfig
from ...model.debugger_rules import Rule
from ...model.distribution import Distribution
from ...model.job_family import check_job_tags
from ...model.profiler_config import ProfilerConfig
from ...model.request.training import normalize_string_map
from ...model.rule_engine import RuleEngine
from .._cdk.compliance import acknowledge_compliance
from .._cdk.images import concrete_region
from .._cdk.lazy import LazyPath, remember_path
from .._cdk.nag import Findings
from ..output_locations import claim_output_location
from ..rule_set import ProfilerRuleSet
from ..sampler import Sampler
from ._parts import JobParts
from .channels import InputChannel
from .coarse_sampling import warn_about_coarse_sampling
from .engines import bind as bind_engine
from .execution_role import ExecutionPolicy
from .multinode import attach_code, grant_job_locations, resolve_props, secure_cluster_network
from .network import place_in_vpc
from .outputs import create_output_bucket, output_location
from .profiling import choose_profiling
from .props import (
    StackValidation,
    check_dependent_props,
    check_distribution,
    check_profiler,
    check_rule_set,
    check_stopping_condition,
)
from .state_machine import create_launch, start_on_deploy


def start(job: JobParts, scope: Construct, id: str) -> None:
    remember_path(job, scope, id)  # its path, from the scope's (asked once per scope), when it is needed
    job._where = LazyPath(job)  # each CDK call is a jsii round trip: the path is computed only for an error
    job._stack = scope if isinstance(scope, cdk.Stack) else cdk.Stack.of(job)
    job._region = concrete_region(job._stack)
    job._findings = Findings(job, job._stack)  # cdk-nag acknowledgements, written once at the end
    job._warnings: set[str] = set()

def record_engine(job: JobParts, rule_engine: RuleEngine, profiler: ProfilerConfig | None,
                   rule_set: ProfilerRuleSet | None, distribution: Distribution | None, instance_type: str) -> None:
    job._engine = bind_engine(rule_engine, job)
    job.rule_engine: RuleEngine = rule_engine
    job.profiler = check_profiler(job, profiler, instance_type)
    job.rule_set = check_rule_set(job, rule_set)
    job.distribution = check_distribution(job, distribution)

def record_stopping(job: JobParts, max_runtime: cdk.Duration | None, max_wait: cdk.Duration | None,
                     use_spot_instances: bool) -> None:
    job._stopping = check_stopping_condition(job, max_runtime, max_wait, use_spot_instances)
    job.max_runtime, job.max_wait, job.use_spot_instances = max_runtime, max_wait, use_spot_instances

def record_checkpoints(job: JobParts, checkpoints: Any, checkpoint_s3_uri: str | None, checkpoint_local_path: str | None,
                        encrypt_inter_container_traffic: bool, enable_inter_container_traffic_encryption: bool | None,
                        *, vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None,
                        security_groups: Sequence[ec2.ISecurityGroup] | None) -> bool:
    """Resolves ``checkpoints=`` and the traffic-encryption props; returns whether traffic is encrypted."""
    checkpoint_s3_uri, checkpoint_local_path, encrypt_inter_container_traffic = resolve_props(
        job, checkpoints=checkpoints, checkpoint_s3_uri=checkpoint_s3_uri, checkpoint_local_path=checkpoint_local_path,
        encrypt_inter_container_traffic=encrypt_inter_container_traffic,
        enable_inter_container_traffic_encryption=enable_inter_container_traffic_encryption)
    check_dependent_props(job, checkpoint_s3_uri, checkpoint_local_path, vpc, vpc_subnets, security_groups)
    job.checkpoint_s3_uri, job.checkpoint_local_path = checkpoint_s3_uri, checkpoint_local_path
    return encrypt_inter_container_traffic

def create_outputs(job: JobParts, sampler: Sampler | None, output_bucket: s3.IBucket | None,
                    output_kms_key: kms.IKey | None, output_prefix: str, debugger_rules: Sequence[Rule] | None,
                    debug_hook: DebugHookConfig | bool | None, tensorboard: TensorBoardOutputConfig | None,
                    code: Any) -> None:
    job.sampler = choose_profiling(job, sampler)
    warn_about_coarse_sampling(job)
    job.output_bucket = create_output_bucket(job, output_bucket, output_kms_key)
    record_output_location(job, output_kms_key, output_prefix)
    add_initial_debugger_rules(job, debugger_rules, debug_hook, tensorboard)
    attach_code(job, code)

def create_role_and_network(job: JobParts, role: iam.IRole | None, vpc: ec2.IVpc | None,
                             vpc_subnets: ec2.SubnetSelection | None,
                             security_groups: Sequence[ec2.ISecurityGroup] | None) -> None:
    job._policy = ExecutionPolicy(job)
    job.role = role if role is not None else job._policy.create_role(vpc is not None)
    grant_job_locations(job)
    job._role_arn = job.role.role_arn
    claim_output_location(job, bucket=job.output_bucket, prefix=job.output_prefix,
                          names=f"{job.job_name_prefix}-", roles=[job._role_arn], what="the training job",
                          stack=job._stack)
    job.vpc, job.security_groups, job._subnet_ids = place_in_vpc(job, vpc, vpc_subnets, security_groups)
    job._security_group_ids = [sg.security_group_id for sg in job.security_groups]
    secure_cluster_network(job, created=not security_groups)

def launch(job: JobParts, evaluator: Any, run_on_deploy: bool) -> None:
    launch = create_launch(job)
    job.naming_state, job.launch_state = launch.naming_state, launch.launch_state
    job.log_group, job.state_machine = launch.log_group, launch.state_machine
    StackValidation.register(job)
    job.evaluator = job._engine.attach(evaluator)
    if "training_jobs" in job.__dict__:  # the family was taken before the evaluator existed
        job.training_jobs.origin.evaluator = job.evaluator  # type: ignore[union-attr]
    acknowledge_compliance(job, "ProfiledTrainingJob", findings=job._findings)  # with the cdk-nag ones, at synthesis
    job.deploy_trigger = start_on_deploy(job) if run_on_deploy else None

def record_identity(job: JobParts, job_name_prefix: str, training_image: str | None, algorithm_name: str | None,
                     training_input_mode: str, instance_type: str, instance_count: int,
                     volume_size_in_gb: int) -> None:
    """What the job is and what it runs on, once checked."""
    job.job_name_prefix = job_name_prefix
    job.training_image = training_image
    job.algorithm_name = algorithm_name
    job.training_input_mode = training_input_mode
    job.instance_type = instance_type
    job.instance_count = instance_count
    job.volume_size_in_gb = volume_size_in_gb

def record_container_props(job: JobParts, *, hyperparameters: Mapping[str, Any] | None,
                            environment: Mapping[str, Any] | None, training_image_repository: ecr.IRepository | None,
                            volume_kms_key: kms.IKey | None, inputs: Sequence[InputChannel] | None,
                            enable_network_isolation: bool, encrypt_inter_container_traffic: bool,
                            tags: Mapping[str, str] | None) -> None:
    """The container's inputs and settings; hyperparameters and environment become string maps (the API's)."""
    job._hyperparameters = normalize_string_map(hyperparameters, field="hyperparameters", where=job._where)
    job._environment = normalize_string_map(environment, field="environment", where=job._where)
    job.training_image_repository = training_image_repository
    job.volume_kms_key = volume_kms_key
    job.inputs = tuple(inputs or ())
    job.enable_network_isolation = enable_network_isolation
    job.encrypt_inter_container_traffic = encrypt_inter_container_traffic
    job.tags = check_job_tags(tags, where=job._where)

def record_output_location(job: JobParts, output_kms_key: kms.IKey | None, output_prefix: str) -> None:
    """The S3 locations derived from the output bucket, and the sampler bundle."""
    job.output_kms_key = output_kms_key
    job._output_key_arn = output_kms_key.key_arn if output_kms_key is not None else None
    job._volume_key_arn = job.volume_kms_key.key_arn if job.volume_kms_key is not None else None
    location = output_location(job, job.output_bucket, output_prefix)
    job.output_prefix, job.output_s3_uri = location.prefix, location.s3_uri
    job._output_bucket_arn = location.bucket_arn
    job.profiler_s3_uri = job.profiler.s3_output_path or job.output_s3_uri
    job.sampler_bundle = job.sampler.bundle(job._stack) if job.sampler is not None else None
    job.rule_output_s3_uri = job.output_s3_uri

def add_initial_debugger_rules(job: JobParts, debugger_rules: Sequence[Rule] | None,
                                debug_hook: DebugHookConfig | bool | None,
                                tensorboard: TensorBoardOutputConfig | None) -> None:
    """Debugger's rules, hook and TensorBoard output through the rule engine's guard rails."""
    job.debug_hook_setting = debug_hook
    job.tensorboard = tensorboard
    job._engine.add_initial_debugger_rules(() if debugger_rules is None else debugger_rules)
