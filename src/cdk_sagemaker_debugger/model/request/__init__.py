"""The CreateTrainingJob request: one renderer per member (``.render``), the typed members beyond the basics and
``request_overrides`` with the table covering every member of botocore's model (``.members``), and the checks and
member order that need no CDK (``.training``)."""
