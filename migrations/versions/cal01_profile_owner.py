"""calibration: owner of each profile name

Revision ID: cal01
Revises: plan01
Create Date: 2026-12-06 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = 'cal01'
down_revision: str | Sequence[str] | None = 'plan01'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # existing profiles get no owner: only admins add versions to their names (app/services/calibration.py)
    with op.batch_alter_table('calibration_profile', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner_id', sa.Uuid(), nullable=True))
        batch_op.create_index(batch_op.f('ix_calibration_profile_owner_id'), ['owner_id'], unique=False)
        batch_op.create_foreign_key(
            'fk_calibration_profile_owner_id_user_account', 'user_account', ['owner_id'], ['id'],
            ondelete='SET NULL',
        )


def downgrade() -> None:
    with op.batch_alter_table('calibration_profile', schema=None) as batch_op:
        batch_op.drop_constraint('fk_calibration_profile_owner_id_user_account', type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_calibration_profile_owner_id'))
        batch_op.drop_column('owner_id')
