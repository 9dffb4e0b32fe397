"""The admin port's route groups (API and console), in the order a request is matched."""

from __future__ import annotations

from typing import TYPE_CHECKING

from collector.admin.baselines import BaselineRoutes
from collector.admin.datasets import DatasetRoutes
from collector.admin.decisions import DecisionRoutes
from collector.admin.health import HealthRoutes
from collector.admin.http import RouteGroup
from collector.admin.judges import JudgeRoutes
from collector.admin.replay import ReplayRoutes
from collector.admin.review import ReviewRoutes
from collector.admin.sessions import SessionRoutes
from collector.admin.sql import SqlRoutes
from collector.admin.trajectories import TrajectoryRoutes
from collector.console.canary import TargetPage
from collector.console.datasets import DatasetPages
from collector.console.decisions import DecisionPages
from collector.console.login import LoginRoutes
from collector.console.packs import PacksPage
from collector.console.review import ReviewPages
from collector.console.routes import ConsoleRoutes
from collector.console.sessions import SessionPages
from collector.console.sql import SqlPage
from collector.console.trajectories import TrajectoryPages
from collector.datasets.recertify import Recertifier
from collector.datasets.service import Datasets
from collector.review.desk import ReviewDesk
from collector.review.identity import Identities

if TYPE_CHECKING:
    from collector.pipeline import Pipeline


def admin_routes(pipeline: Pipeline) -> list[RouteGroup]:
    """Every route group, each handed only the parts of the pipeline it reads or acts on."""
    sql = SqlRoutes(pipeline.config.sql, pipeline.database)  # the console's SQL page shares it
    now = pipeline.clock.now
    datasets = Datasets(pipeline.database, pipeline.writer, now)
    recertifier = Recertifier(
        pipeline.database, pipeline.writer, pipeline.packs, now, pipeline.config.decisions.recertify
    )
    desk = ReviewDesk(
        pipeline.database, pipeline.writer, pipeline.packs, pipeline.config.review, pipeline.clock
    )
    console = pipeline.console
    identities = Identities(
        console.auth,
        pipeline.config.admin.user_header,
        lambda request: login.name if (login := console.session_of(request)) else "",
    )
    return [
        HealthRoutes(pipeline.registry, pipeline.not_ready_reason, pipeline.evaluation.status),
        TrajectoryRoutes(pipeline.database, pipeline.clock.now),
        SessionRoutes(pipeline.database, pipeline.clock.now),
        DecisionRoutes(pipeline.decisions, pipeline.notifier, pipeline.database, recertifier),
        DatasetRoutes(datasets),
        sql,
        ReviewRoutes(desk, identities, pipeline.clock.now),
        ReplayRoutes(pipeline.writer),
        BaselineRoutes(pipeline.database, pipeline.writer, pipeline.clock.now),
        JudgeRoutes(pipeline.packs, pipeline.database, pipeline.writer, pipeline.clock.now),
        ConsoleRoutes(pipeline.decisions, pipeline.database, pipeline.clock.now),
        TargetPage(pipeline.database, pipeline.packs, pipeline.clock.now),
        LoginRoutes(pipeline.console),
        DecisionPages(pipeline.decisions, pipeline.database, pipeline.clock.now, recertifier),
        DatasetPages(datasets),
        TrajectoryPages(pipeline.database, pipeline.clock.now),
        SessionPages(pipeline.database),
        PacksPage(pipeline.evaluation.status),
        ReviewPages(desk, identities, pipeline.clock.now, datasets),
        SqlPage(sql, pipeline.config.cluster, pipeline.peer_token),
    ]
