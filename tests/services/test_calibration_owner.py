"""Who may add a version to a calibration profile name (app.services.calibration), on SQLite and PostgreSQL:
the owner of its first version or an admin; the CLI fits as the operator (an admin without an account)."""

from __future__ import annotations

import uuid

import pytest
from sqlmodel import Session

from app.db import get_engine
from app.models.benchmarks import BenchmarkJob
from app.services.calibration import (
    Fitter,
    ProfileForbiddenError,
    check_may_fit_job,
    fit_profile,
)
from tests.api.test_bench_jobs_api import row
from tests.auth_support import ensure_user

DOC = {"rows": [row(2**p, 20 + 2**p / 5e4) for p in range(10, 20)]}


def test_users_version_only_their_own_names_and_the_cli_any(db_url: str) -> None:
    alice, bob = ensure_user("svc-alice@example.com"), ensure_user("svc-bob@example.com")
    with Session(get_engine()) as session:
        first = fit_profile(session, DOC, "svc-lab", fitter=Fitter(alice.id))
        assert (first.version, first.owner_id) == (1, alice.id)
        with pytest.raises(ProfileForbiddenError, match="belongs to another user"):
            fit_profile(session, DOC, "svc-lab", fitter=Fitter(bob.id))
        with pytest.raises(ProfileForbiddenError, match="does not belong to a user account"):
            fit_profile(session, DOC, "svc-lab", fitter=Fitter(None))
        assert fit_profile(session, DOC, "svc-lab", fitter=Fitter(alice.id)).version == 2

        by_cli = fit_profile(session, DOC, "svc-lab")  # as `clusterplan calibrate fit` calls it
        assert (by_cli.version, by_cli.owner_id) == (3, alice.id)  # the name stays Alice's
        operators = fit_profile(session, DOC, "svc-operator-lab")
        assert operators.owner_id is None
        with pytest.raises(ProfileForbiddenError, match="only an admin may add a version"):
            fit_profile(session, DOC, "svc-operator-lab", fitter=Fitter(alice.id))
        assert (
            fit_profile(session, DOC, "svc-operator-lab", fitter=Fitter(bob.id, is_admin=True)).version == 2
        )


def test_only_the_creator_or_an_admin_fits_from_a_job() -> None:
    job = BenchmarkJob(kind="collectives", params={}, created_by=uuid.uuid4())
    check_may_fit_job(job, Fitter(job.created_by))
    check_may_fit_job(job, Fitter(None, is_admin=True))  # an admin, or the CLI
    for stranger in (Fitter(uuid.uuid4()), Fitter(None)):
        with pytest.raises(ProfileForbiddenError, match="only its creator or an admin"):
            check_may_fit_job(job, stranger)
    legacy = BenchmarkJob(kind="collectives", params={})  # no creator: admins only
    with pytest.raises(ProfileForbiddenError):
        check_may_fit_job(legacy, Fitter(uuid.uuid4()))
