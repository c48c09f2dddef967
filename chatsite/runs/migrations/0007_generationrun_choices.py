from django.db import migrations, models
import django.db.models.deletion


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0006_generationrun_logprobs'),
    ]

    operations = [
        migrations.AddField(
            model_name='generationrun',
            name='choice_index',
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='generationrun',
            name='choice_of',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name='other_choices', to='runs.generationrun'),
        ),
    ]
