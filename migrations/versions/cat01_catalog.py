"""catalog: owner of users' models and price rows

Revision ID: cat01
Revises: 0001
Create Date: 2026-11-29 17:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = 'cat01'
down_revision: str | Sequence[str] | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ('model_spec', 'price_row')


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('owner_id', sa.Uuid(), nullable=True))
            batch_op.create_index(batch_op.f(f'ix_{table}_owner_id'), ['owner_id'], unique=False)
            batch_op.create_foreign_key(
                f'fk_{table}_owner_id_user_account', 'user_account', ['owner_id'], ['id'], ondelete='SET NULL'
            )


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f'fk_{table}_owner_id_user_account', type_='foreignkey')
            batch_op.drop_index(batch_op.f(f'ix_{table}_owner_id'))
            batch_op.drop_column('owner_id')
