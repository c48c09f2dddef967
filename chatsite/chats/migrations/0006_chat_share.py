import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('chats', '0005_chat_pinned_archived'),
    ]

    operations = [
        migrations.CreateModel(
            name='ChatShare',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('token_hash', models.CharField(max_length=64, unique=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('revoked_at', models.DateTimeField(blank=True, null=True)),
                ('chat', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='shares',
                                           to='chats.chat')),
            ],
            options={
                'indexes': [models.Index(fields=['chat', '-created_at'], name='chats_chats_chat_id_6ec7b5_idx')],
            },
        ),
    ]
