"""Model layer: pure Python rule catalogs, validation, request rendering and region tables.

Nothing here imports ``aws_cdk`` or ``boto3`` so the catalog can be used from a laptop, a CLI or a Lambda
without paying for the jsii runtime.
"""
