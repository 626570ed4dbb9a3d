"""The product's main path, offline and end to end, with the synthesized configuration (no copy of it):

sampler (this machine, fake GPUs, steps that stop: a hang) -> S3 (moto's server, real HTTP) -> the evaluator's Lambda
handler -> a verdict event on the stack's verdict bus -> the RuleAlarm rule's synthesized pattern -> RuleAlarm's
handler -> exactly one notification per rule that found issues on the alarm's topic: LowGPUUtilization and
TrainingHang.

Every name, environment variable, event pattern, table key and request member comes from the synthesized template,
resolved to the values a deployment in account 123456789012 would have (tests/template_values.py). SageMaker is the one
service without a local stand-in: DescribeTrainingJob is answered by botocore's Stubber, which checks every response
against the service model, with the synthesized CreateTrainingJob request as the job's description.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import boto3
import botocore.session
import pytest
from aws_cdk.assertions import Template
from botocore.stub import Stubber
from moto.server import ThreadedMotoServer
from sampler_fakes import clock_crossing_a_minute, write_fake_smi
from template_values import ACCOUNT, TemplateResolver

from cdk_sagemaker_debugger import Email, ProfiledTrainingJob, ProfilerRuleSet, RuleAlarm, Sampler, rules
from cdk_sagemaker_debugger.runtime.evaluator import lambda_handler as evaluator_lambda
from cdk_sagemaker_debugger.runtime.rule_alarm.alarm import RuleAlarmProcessor
from cdk_sagemaker_debugger.runtime.rule_alarm.settings import Settings as AlarmSettings
from cdk_sagemaker_debugger.runtime.sampler.daemon import Daemon
from cdk_sagemaker_debugger.runtime.sampler.settings import from_environment as sampler_settings
from cdk_sagemaker_debugger.runtime.sampler.timeline import TimelineWriter

REGION = "us-east-1"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
JOB = "e2e-resnet-0a1b2c3d4e5f60718293"  # what the state machine names a run: <prefix>-<20 hex>
SAMPLING_SECONDS = 3.0
STEPPING_SECONDS = 0.8  # then the steps stop while the sampler goes on: TrainingHang (minutes=0.02, 1.2 s) fires
EVALUATOR_HANDLER = "evaluator.lambda_handler.handler"
ALARM_HANDLER = "rule_alarm.handler.handler"
# moto 5.2.5 delivers an event to a queue without its "account" (its default input template leaves it out), which
# EventBridge always sends and RuleAlarm checks; this transformer delivers the whole envelope, as EventBridge does.
WHOLE_EVENT = {
    "InputPathsMap": {k: f"$.{k}" for k in ("id", "time", "detail-type", "source", "account", "region", "resources",
                                            "detail")},
    "InputTemplate": '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
                     '"source": "<source>", "account": "<account>", "region": "<region>", "resources": <resources>, '
                     '"detail": <detail>}',
}
DESCRIBE = botocore.session.get_session().get_service_model("sagemaker").shape_for("DescribeTrainingJobResponse")


# -- the app, synthesized --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def deployed() -> TemplateResolver:
    """The quick start with a rule a three-second run can judge (patience and window in samples, not minutes)."""
    stack = cdk.Stack(cdk.App(), "EndToEnd", env=cdk.Environment(region=REGION))
    rule_set = ProfilerRuleSet(stack, "Rules", rules=[
        rules.LowGPUUtilization(threshold_p95=80, threshold_p5=10, window=10, patience=5),
        rules.TrainingHang(minutes=0.02)])
    job = ProfiledTrainingJob(stack, "Job", job_name_prefix="e2e-resnet", training_image=IMAGE,
                              instance_type="ml.g5.2xlarge", rule_set=rule_set, sampler=Sampler(interval_millis=100))
    RuleAlarm(stack, "Alarm", training_jobs=job.training_jobs, actions=[Email("ml-team@example.com")])
    return TemplateResolver("EndToEnd", Template.from_stack(stack).to_json(), REGION)


def synthesized_request(deployed: TemplateResolver) -> dict[str, Any]:
    """The CreateTrainingJob parameters of the state machine's task, resolved, with the run's name filled in."""
    _, machine = deployed.one("AWS::StepFunctions::StateMachine")
    states = json.loads(deployed.resolve(machine["DefinitionString"]))["States"]
    [task] = [s for s in states.values() if s.get("Resource", "").endswith(":sagemaker:createTrainingJob.sync")]
    request = {k: v for k, v in task["Parameters"].items() if not k.endswith(".$")}
    return {"TrainingJobName": JOB, **request}


def description(request: dict[str, Any], started: datetime, ended: datetime) -> dict[str, Any]:
    """DescribeTrainingJob of a completed run of ``request`` (the members both shapes have, plus the run's facts)."""
    members = {k: v for k, v in request.items() if k in DESCRIBE.members}
    return {
        **members,
        "TrainingJobArn": f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{JOB}",
        "TrainingJobStatus": "Completed",
        "SecondaryStatus": "Completed",
        "ModelArtifacts": {"S3ModelArtifacts": f"{request['OutputDataConfig']['S3OutputPath']}/{JOB}/output/model.tar.gz"},
        "CreationTime": started - timedelta(minutes=2),
        "TrainingStartTime": started,
        "TrainingEndTime": ended,
        "SecondaryStatusTransitions": [
            {"Status": "Starting", "StartTime": started - timedelta(minutes=2), "EndTime": started},
            {"Status": "Training", "StartTime": started, "EndTime": ended},
            {"Status": "Completed", "StartTime": ended},
        ],
    }


# -- the AWS side, on moto's server ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    saved = dict(os.environ)
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION=REGION,
                      AWS_REGION=REGION)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        os.environ.clear()
        os.environ.update(saved)


def client(endpoint: str, service: str) -> Any:
    return boto3.client(service, region_name=REGION, endpoint_url=endpoint)


def stubbed_sagemaker(response: dict[str, Any], calls: int) -> tuple[Any, Stubber]:
    sagemaker = boto3.client("sagemaker", region_name=REGION)
    stub = Stubber(sagemaker)
    for _ in range(calls):
        stub.add_response("describe_training_job", response, {"TrainingJobName": JOB})
    stub.activate()
    return sagemaker, stub


def provision(deployed: TemplateResolver, endpoint: str) -> dict[str, Any]:
    """Create what the template declares and the path needs: the output bucket, the verdict bus with RuleAlarm's
    verdict rule (its synthesized pattern) delivering to a queue, the ledger table, the topic with a queue subscribed."""
    s3, events, sqs = client(endpoint, "s3"), client(endpoint, "events"), client(endpoint, "sqs")
    bucket_id, _ = deployed.one("AWS::S3::Bucket", lambda p: "VersioningConfiguration" in p)
    s3.create_bucket(Bucket=deployed.physical_name(bucket_id))
    bus_id, _ = deployed.one("AWS::Events::EventBus")
    bus = deployed.physical_name(bus_id)
    events.create_event_bus(Name=bus)
    verdicts = sqs.create_queue(QueueName="verdicts")["QueueUrl"]
    _, rule = deployed.one("AWS::Events::Rule", lambda p: "EventBusName" in p and "cdk-sagemaker-debugger" in
                           json.dumps(p.get("EventPattern")) and "Continuation" not in json.dumps(p["EventPattern"]))
    pattern = deployed.resolve(rule["EventPattern"])
    events.put_rule(Name="verdicts", EventBusName=bus, EventPattern=json.dumps(pattern))
    events.put_targets(Rule="verdicts", EventBusName=bus, Targets=[
        {"Id": "q", "Arn": queue_arn(sqs, verdicts), "InputTransformer": WHOLE_EVENT}])
    _, table = deployed.one("AWS::DynamoDB::Table")
    dynamodb = client(endpoint, "dynamodb")
    table_name = deployed.physical_name(deployed.one("AWS::DynamoDB::Table")[0])
    dynamodb.create_table(TableName=table_name, KeySchema=table["KeySchema"],
                          AttributeDefinitions=table["AttributeDefinitions"], BillingMode="PAY_PER_REQUEST")
    sns = client(endpoint, "sns")
    # the notification topic (not the alarm's operations topic, which only its CloudWatch alarms notify)
    topic_id, _ = deployed.one("AWS::SNS::Topic", lambda p: p.get("DisplayName") == "SageMaker rule alarm")
    topic_arn = sns.create_topic(Name=deployed.physical_name(topic_id))["TopicArn"]
    assert topic_arn == deployed.arn(topic_id)
    inbox = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    sns.subscribe(TopicArn=topic_arn, Protocol="sqs", Endpoint=queue_arn(sqs, inbox),
                  Attributes={"RawMessageDelivery": "true"})
    return {"verdicts": verdicts, "inbox": inbox, "pattern": pattern}


def queue_arn(sqs: Any, url: str) -> str:
    return sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]


def drain(sqs: Any, url: str) -> list[str]:
    bodies = []
    while True:
        messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", [])
        if not messages:
            return bodies
        for message in messages:
            bodies.append(message["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])


# -- the run ------------------------------------------------------------------------------------------------------------
def sample_like_the_container(request: dict[str, Any], endpoint: str, folder: Path) -> None:
    """The sampler with the job's synthesized environment, as the container would start it: idle fake GPUs, uploads
    with the standard-library client to moto's server over HTTP."""
    write_fake_smi(folder / "bin")
    env = {**request["Environment"], "TRAINING_JOB_NAME": JOB, "AWS_ENDPOINT_URL_S3": endpoint,
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": REGION}
    saved = {k: os.environ.get(k) for k in ("PATH", "FAKE_GPUS", "FAKE_GPU_UTIL")}
    os.environ.update(PATH=f"{folder / 'bin'}{os.pathsep}{os.environ['PATH']}", FAKE_GPUS="2", FAKE_GPU_UTIL="5")
    try:
        settings = sampler_settings(env, local_dir=str(folder / "local"), nvml_library=str(folder / "no-nvml.so"))
        clock = clock_crossing_a_minute(1.5)
        steps = threading.Thread(target=steps_then_hang, args=(settings.local_dir, clock))
        steps.start()
        status = Daemon(settings, clock=clock).run(SAMPLING_SECONDS)
        steps.join()
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
    assert status.get("gpu_source") == "nvidia-smi", status


def steps_then_hang(local_dir: str, clock) -> None:
    """Rank 0's step events for STEPPING_SECONDS, then none (its timeline is written out, as on an idle process)."""
    writer = TimelineWriter(local_dir, "0-algo-1", log=print, clock=clock)
    end, step = time.monotonic() + STEPPING_SECONDS, 0
    while time.monotonic() < end:
        started = clock()
        time.sleep(0.05)
        writer.add("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", started, clock(), {"pid": 1, "step_num": str(step)})
        step += 1
    writer.close()


@pytest.fixture(scope="module")
def main_path(deployed: TemplateResolver, endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    aws = provision(deployed, endpoint)
    request = synthesized_request(deployed)
    sample_like_the_container(request, endpoint, tmp_path_factory.mktemp("container"))
    now = datetime.now(timezone.utc)
    described = description(request, now - timedelta(minutes=5), now)
    sagemaker, _ = stubbed_sagemaker(described, calls=10)
    _, function = deployed.one("AWS::Lambda::Function", lambda p: p.get("Handler") == EVALUATOR_HANDLER)
    variables = dict(function["Environment"]["Variables"])
    queue_ref = variables.pop("JOB_QUEUE_URL")  # the job queue: created here, as the template declares it (FIFO)
    _, queue = deployed.one("AWS::SQS::Queue", lambda p: p is deployed.template["Resources"][queue_ref["Ref"]][
        "Properties"])
    sqs = client(endpoint, "sqs")
    job_queue = sqs.create_queue(QueueName="jobs.fifo", Attributes={"FifoQueue": str(queue["FifoQueue"]).lower()})[
        "QueueUrl"]
    evaluator_env = {**{k: str(v) for k, v in deployed.resolve(variables).items()}, "JOB_QUEUE_URL": job_queue}
    evaluator_clients = evaluator_lambda.Clients(s3=client(endpoint, "s3"), events=client(endpoint, "events"),
                                                 sagemaker=sagemaker, cloudwatch=client(endpoint, "cloudwatch"),
                                                 sqs=sqs)
    job_ended = {"source": "aws.sagemaker", "detail-type": "SageMaker Training Job State Change",
                 "detail": {"TrainingJobName": JOB, "TrainingJobStatus": "Completed"}}
    settings = evaluator_lambda.Settings.from_env(evaluator_env)
    queued = evaluator_lambda.handler(job_ended, None, clients=evaluator_clients, settings=settings)
    assert queued == {"jobs": [{"job": JOB, "result": "queued"}]}
    [message] = sqs.receive_message(QueueUrl=job_queue, MaxNumberOfMessages=10).get("Messages", [])
    record = {"eventSource": "aws:sqs", "messageId": message["MessageId"], "body": message["Body"]}
    evaluated = evaluator_lambda.handler({"Records": [record]}, None, clients=evaluator_clients, settings=settings)
    assert evaluated["batchItemFailures"] == []
    verdicts = [json.loads(body) for body in drain(sqs, aws["verdicts"])]
    alarm_sagemaker, _ = stubbed_sagemaker(described, calls=10)
    alarm = RuleAlarmProcessor(AlarmSettings.from_environment(deployed.function_environment(ALARM_HANDLER)),
                               sagemaker=alarm_sagemaker, sns=client(endpoint, "sns"),
                               events=client(endpoint, "events"), dynamodb=client(endpoint, "dynamodb"),
                               s3=client(endpoint, "s3"))
    outcomes = [alarm.handle(event) for event in verdicts]
    return {"aws": aws, "sqs": sqs, "evaluated": evaluated, "verdicts": verdicts, "alarm": alarm,
            "outcomes": outcomes, "s3": client(endpoint, "s3"), "request": request, "deployed": deployed}


def test_the_sampler_files_are_where_the_evaluator_reads_them(main_path):
    request = main_path["request"]
    bucket, _, prefix = request["OutputDataConfig"]["S3OutputPath"][len("s3://"):].partition("/")
    keys = [o["Key"] for o in main_path["s3"].list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{JOB}/profiler-output/")
            .get("Contents", [])]
    # the default upload format: gzip-compressed minutes, which the evaluator reads as they are
    assert any("/profiler-output/system/incremental/" in k and k.endswith(".algo-1.json.gz") for k in keys), keys
    [outcome] = main_path["evaluated"]["jobs"]
    assert outcome["result"] == "final"
    assert outcome["statuses"] == {"LowGPUUtilization": "IssuesFound", "TrainingHang": "IssuesFound"}


def test_one_verdict_event_reaches_the_alarm_through_its_synthesized_pattern(main_path):
    [event] = main_path["verdicts"]
    assert event["source"] == "cdk-sagemaker-debugger" and event["account"] == ACCOUNT
    statuses = {s["RuleConfigurationName"]: s["RuleEvaluationStatus"]
                for s in event["detail"]["ProfilerRuleEvaluationStatuses"]}
    assert statuses == {"LowGPUUtilization": "IssuesFound", "TrainingHang": "IssuesFound"}


def test_exactly_one_notification_and_none_on_redelivery(main_path):
    sqs, inbox = main_path["sqs"], main_path["aws"]["inbox"]
    messages = drain(sqs, inbox)
    assert len(messages) == 2 and all(JOB in m and "IssuesFound" in m for m in messages)
    [hang] = [m for m in messages if "TrainingHang" in m]  # one notification for the hang
    [low_gpu] = [m for m in messages if "LowGPUUtilization" in m]
    assert "rule-output/TrainingHang/" in hang and hang != low_gpu
    for event in main_path["verdicts"]:  # EventBridge delivers at least once: a repeat changes nothing
        main_path["alarm"].handle(event)
    assert drain(sqs, inbox) == []
