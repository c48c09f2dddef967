"""Three indexes fewer on runs, each written by every non-HOT write of a run (its claim
and finalize change its status): tenant_id and pool_id alone (the Meta indexes lead with
them) and status's LIKE index; status keeps its plain one (the sweep's), renamed. Only the indexes
change in the database: Django would drop and re-add both foreign keys to change
db_index, and re-adding one checks the whole table under lock."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0004_message_tool_calls'),
        ('pools', '0005_modelpool_chat_template'),
        ('runs', '0007_generationrun_choices'),
        ('tenancy', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='generationrun',
                    name='pool',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='pools.modelpool'),
                ),
                migrations.AlterField(
                    model_name='generationrun',
                    name='status',
                    field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=10),
                ),
                migrations.AlterField(
                    model_name='generationrun',
                    name='tenant',
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='tenancy.tenant'),
                ),
                migrations.AddIndex(
                    model_name='generationrun',
                    index=models.Index(fields=['status'], name='runs_status_idx'),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    sql=[
                        'DROP INDEX IF EXISTS "runs_generationrun_pool_id_9284b796"',
                        'DROP INDEX IF EXISTS "runs_generationrun_tenant_id_28691229"',
                        'DROP INDEX IF EXISTS "runs_generationrun_status_03e3e46c_like"',
                        'ALTER INDEX "runs_generationrun_status_03e3e46c" RENAME TO "runs_status_idx"',
                    ],
                    reverse_sql=[
                        'ALTER INDEX "runs_status_idx" RENAME TO "runs_generationrun_status_03e3e46c"',
                        'CREATE INDEX "runs_generationrun_pool_id_9284b796" ON "runs_generationrun" ("pool_id")',
                        'CREATE INDEX "runs_generationrun_tenant_id_28691229" ON "runs_generationrun" ("tenant_id")',
                        'CREATE INDEX "runs_generationrun_status_03e3e46c_like" ON "runs_generationrun" '
                        '("status" varchar_pattern_ops)',
                    ],
                ),
            ],
        ),
    ]
