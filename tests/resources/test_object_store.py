"""What an object store's refusal means (fabric_resources/object_store.py)."""

from __future__ import annotations

from fabric_resources.object_store import store_problem

#: Lance's error (cut) when the tables are on S3 and no credentials are configured or found in the
#: environment: the instance-metadata lookup is refused.
NO_CREDENTIALS = ("LanceError(IO): Generic N/A error: LanceError(IO): Failed to get AWS credentials: "
                  "ProviderError(ProviderError { source: FailedToLoadToken(FailedToLoadToken { source: "
                  "ServiceError(ServiceError { source: TokenError { kind: Forbidden }, raw: Response { "
                  "status: StatusCode(403) ...")


def test_no_credentials_is_a_store_that_cannot_be_used():
    """guards against (hostile trial 11c): `fabric ingest` into an s3:// tables_uri with no
    credentials passing the store check (the error matched no known answer), then running the
    pipeline while Lance retried its writes for minutes, instead of one line and exit 2
    (docs/scale.md)."""
    assert store_problem(ValueError(NO_CREDENTIALS)) == "access-denied (Failed to get AWS credentials)"
    assert store_problem(ValueError("Dataset at path t.lance was not found")) is None
