"""plans: sharing with an e-mail that has no account yet (an invitation)

Revision ID: inv01
Revises: cal01
Create Date: 2026-12-05 23:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op


revision: str = 'inv01'
down_revision: str | Sequence[str] | None = 'cal01'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('plan_invite',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('plan_id', sa.Uuid(), nullable=False),
    sa.Column('email', sqlmodel.sql.sqltypes.AutoString(length=320), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['plan_id'], ['plan.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('plan_id', 'email', name='uq_plan_invite')
    )
    with op.batch_alter_table('plan_invite', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_plan_invite_plan_id'), ['plan_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_plan_invite_email'), ['email'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('plan_invite', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_plan_invite_email'))
        batch_op.drop_index(batch_op.f('ix_plan_invite_plan_id'))
    op.drop_table('plan_invite')
