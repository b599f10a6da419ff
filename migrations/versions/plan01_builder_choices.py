"""plans: the builder's choices saved with each revision

Revision ID: plan01
Revises: sec01
Create Date: 2026-12-04 21:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = 'plan01'
down_revision: str | Sequence[str] | None = 'sec01'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # existing revisions get no choices: they reopen with the builder's defaults, as before
    with op.batch_alter_table('plan_revision', schema=None) as batch_op:
        batch_op.add_column(sa.Column('builder_choices', sa.JSON(), nullable=False, server_default='{}'))


def downgrade() -> None:
    with op.batch_alter_table('plan_revision', schema=None) as batch_op:
        batch_op.drop_column('builder_choices')
