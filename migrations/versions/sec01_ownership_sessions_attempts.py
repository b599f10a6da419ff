"""security: plan sharing, session versions, login throttle, job attempts

Revision ID: sec01
Revises: cat01
Create Date: 2026-12-04 01:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = 'sec01'
down_revision: str | Sequence[str] | None = 'cat01'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('plan', schema=None) as batch_op:
        batch_op.add_column(sa.Column('visibility', sa.String(length=20), nullable=False, server_default='private'))
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_version', sa.Integer(), nullable=False, server_default='0'))
    with op.batch_alter_table('job_event', schema=None) as batch_op:
        batch_op.add_column(sa.Column('attempt', sa.Integer(), nullable=False, server_default='0'))

    op.create_table('plan_share',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('plan_id', sa.Uuid(), nullable=False),
    sa.Column('user_id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['plan_id'], ['plan.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['user_id'], ['user_account.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plan_id', 'user_id', name='uq_plan_share')
    )
    with op.batch_alter_table('plan_share', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_plan_share_plan_id'), ['plan_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_plan_share_user_id'), ['user_id'], unique=False)

    op.create_table('login_throttle',
    sa.Column('key', sqlmodel.sql.sqltypes.AutoString(length=400), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.Column('last_failure_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('blocked_until', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('key')
    )

    op.create_table('job_attempt',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('job_id', sa.Uuid(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('node_id', sa.Uuid(), nullable=True),
    sa.Column('status', sqlmodel.sql.sqltypes.AutoString(length=20), nullable=False),
    sa.Column('partial_rows', sa.JSON(), nullable=False),
    sa.Column('log_tail', sa.Text(), server_default='', nullable=False),
    sa.Column('error', sqlmodel.sql.sqltypes.AutoString(length=5000), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['job_id'], ['benchmark_job.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['node_id'], ['node.id'], ),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'attempt', name='uq_job_attempt')
    )
    with op.batch_alter_table('job_attempt', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_job_attempt_job_id'), ['job_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('job_attempt', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_job_attempt_job_id'))
    op.drop_table('job_attempt')
    op.drop_table('login_throttle')
    with op.batch_alter_table('plan_share', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_plan_share_user_id'))
        batch_op.drop_index(batch_op.f('ix_plan_share_plan_id'))
    op.drop_table('plan_share')
    with op.batch_alter_table('job_event', schema=None) as batch_op:
        batch_op.drop_column('attempt')
    with op.batch_alter_table('user_account', schema=None) as batch_op:
        batch_op.drop_column('session_version')
    with op.batch_alter_table('plan', schema=None) as batch_op:
        batch_op.drop_column('visibility')
