"""Runs inside the side environment that has the SageMaker Python SDK (``make test`` creates ``.venv-sdk``).

Reads a JSON list of cases on stdin and prints, for each, what the SDK's own ``sagemaker.pytorch.PyTorch`` estimator
does with it: the HyperParameters it sends (``_script_mode_hyperparam_update`` as ``_prepare_for_training`` calls it
after uploading the code, then ``hyperparameters()``), or the ValueError it raises. No AWS call is made: the session
has a fixed region and fake credentials, the code is already "uploaded" (an s3:// source_dir is used as is).
"""

import functools
import json
import logging
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.CRITICAL)

import boto3  # noqa: E402
import sagemaker  # noqa: E402
from sagemaker.pytorch import PyTorch  # noqa: E402

# Each estimator's TensorBoard app makes a SageMaker client of its own (boto3.client), which costs most of a case's
# time; one client per region, made once, serves every case the same (no call is made with it).
boto3.client = functools.lru_cache(maxsize=None)(boto3.client)

ROLE = "arn:aws:iam::123456789012:role/Training"


def session(region):
    boto = boto3.Session(region_name=region, aws_access_key_id="testing", aws_secret_access_key="testing")
    return sagemaker.Session(boto_session=boto, default_bucket="oracle-bucket")


def run(case, sessions):
    region = case["region"]
    if region not in sessions:
        sessions[region] = session(region)
    kwargs = dict(entry_point=case["entry_point"], source_dir=case["submit_directory"], role=ROLE,
                  framework_version=case["framework_version"], py_version=case["py_version"],
                  instance_type=case["instance_type"], instance_count=case["instance_count"],
                  sagemaker_session=sessions[region], disable_profiler=True, debugger_hook_config=False)
    if case.get("distribution") is not None:
        kwargs["distribution"] = case["distribution"]
    if case.get("container_log_level") is not None:
        kwargs["container_log_level"] = case["container_log_level"]
    try:
        estimator = PyTorch(**kwargs)
        estimator._current_job_name = case.get("job_name")
        estimator._script_mode_hyperparam_update(case["submit_directory"], case["entry_point"])
        return {"hyperparameters": estimator.hyperparameters()}
    except ValueError as error:
        return {"error": str(error)}


def main():
    cases = json.load(sys.stdin)
    sessions = {}
    json.dump({"sagemaker": sagemaker.__version__, "results": [run(case, sessions) for case in cases]}, sys.stdout)


if __name__ == "__main__":
    main()
