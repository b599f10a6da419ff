"""Saved plans on both databases: immutable revisions, contiguous numbers under 50 concurrent writers,
atomic create, duplicate, delete."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlmodel import Session, col, select

from app.core.errors import SpecError
from app.db import get_engine
from app.errors import NotFoundError
from app.models.plans import Plan, PlanRevision
from app.schemas.plans import PlanCreate, PlanDuplicate, PlanRevise
from app.services import plans as plan_service
from app.services.plans import SERVER_ACTOR as ADMIN
from tests.plans_support import small_scenario

WRITERS = 50


def _create(name: str = "integrity") -> uuid.UUID:
    with Session(get_engine()) as session:
        return plan_service.create_plan(
            session, PlanCreate.model_validate({"name": name, "scenario": small_scenario()}), ADMIN
        ).id


def test_fifty_concurrent_writers_lose_nothing(db_url: str) -> None:
    plan_id = _create()
    barrier = threading.Barrier(WRITERS)

    def write(i: int) -> int:
        barrier.wait()
        with Session(get_engine()) as session:
            out = plan_service.add_revision(session, plan_id, PlanRevise(notes=f"writer {i}"), ADMIN)
            return out.current.revision

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        numbers = list(pool.map(write, range(WRITERS)))

    assert sorted(numbers) == list(range(2, WRITERS + 2))
    with Session(get_engine()) as session:
        revs = session.exec(
            select(PlanRevision).where(PlanRevision.plan_id == plan_id).order_by(col(PlanRevision.revision))
        ).all()
        plan = session.get(Plan, plan_id)
        assert plan is not None
        assert [r.revision for r in revs] == list(range(1, WRITERS + 2))
        assert plan.latest_revision == WRITERS + 1
        # every writer's note landed in exactly one revision
        assert sorted(r.notes for r in revs[1:]) == sorted(f"writer {i}" for i in range(WRITERS))
        assert plan.notes == revs[-1].notes


def test_revisions_are_immutable_and_keep_omitted_fields(db_url: str) -> None:
    plan_id = _create("first name")
    with Session(get_engine()) as session:
        first = plan_service.get_revision(session, plan_id, 1, ADMIN)
        plan_service.add_revision(session, plan_id, PlanRevise(name="second name"), ADMIN)
    with Session(get_engine()) as session:
        plan_service.add_revision(session, plan_id, PlanRevise(notes="a note"), ADMIN)
    with Session(get_engine()) as session:
        again = plan_service.get_revision(session, plan_id, 1, ADMIN)
        latest = plan_service.get_plan(session, plan_id, ADMIN)
        revisions, count = plan_service.list_revisions(session, plan_id, ADMIN)
    assert again == first
    assert latest.name == "second name" and latest.notes == "a note"
    assert latest.current.revision == 3 and latest.latest_revision == 3
    assert count == 3 and [r.revision for r in revisions] == [3, 2, 1]
    assert latest.current.scenario == first.scenario
    assert latest.current.result == first.result


def test_rejected_scenario_writes_nothing_and_names_the_field(db_url: str) -> None:
    """Llama-3 8B has 32 heads: tp=3 (on 3 nodes, dp=8) is rejected with the field path, before any write."""
    bad = small_scenario(tp=3, dp=8)
    bad["cluster"]["nodes"] = 3
    with Session(get_engine()) as session:
        before = len(session.exec(select(Plan)).all())
        with pytest.raises(SpecError) as info:
            plan_service.create_plan(
                session, PlanCreate.model_validate({"name": "bad", "scenario": bad}), ADMIN
            )
    assert any(p.field == "scenario.layout.tp" for p in info.value.problems), info.value.problems
    with Session(get_engine()) as session:
        assert len(session.exec(select(Plan)).all()) == before
        assert (
            session.exec(select(PlanRevision).where(col(PlanRevision.plan_id).not_in(select(Plan.id)))).all()
            == []
        )


def test_duplicate_and_delete(db_url: str) -> None:
    plan_id = _create("original")
    with Session(get_engine()) as session:
        plan_service.add_revision(session, plan_id, PlanRevise(notes="kept"), ADMIN)
        copy = plan_service.duplicate_plan(session, plan_id, PlanDuplicate(), ADMIN)
    assert copy.id != plan_id
    assert copy.name == "Copy of original" and copy.notes == "kept" and copy.latest_revision == 1
    with Session(get_engine()) as session:
        original = plan_service.get_plan(session, plan_id, ADMIN)
        stored = plan_service.get_plan(session, copy.id, ADMIN)  # evaluated again, at the same owner's prices
        assert stored.current.scenario == original.current.scenario
        assert stored.current.result == original.current.result
        plan_service.delete_plan(session, plan_id, ADMIN)
    with Session(get_engine()) as session:
        with pytest.raises(NotFoundError):
            plan_service.get_plan(session, plan_id, ADMIN)
        assert session.exec(select(PlanRevision).where(PlanRevision.plan_id == plan_id)).all() == []
        assert plan_service.get_plan(session, copy.id, ADMIN).name == "Copy of original"


def test_list_paging_and_search(db_url: str) -> None:
    ids = [_create(f"paging plan {i}") for i in range(5)]
    _create("something else")
    with Session(get_engine()) as session:
        page1, count = plan_service.list_plans(session, ADMIN, offset=0, limit=2, q="PAGING")
        page2, _ = plan_service.list_plans(session, ADMIN, offset=2, limit=2, q="paging")
        page3, _ = plan_service.list_plans(session, ADMIN, offset=4, limit=2, q="paging")
    assert count == 5
    seen = [p.id for p in page1 + page2 + page3]
    assert sorted(seen) == sorted(ids)
    assert [p.name for p in page1] == ["paging plan 4", "paging plan 3"]  # newest first
