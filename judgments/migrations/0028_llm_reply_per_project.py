"""The LLM reply cache is kept per project (see `LLMReply`). Replies cached before are dropped: they cannot be
told apart by project, and a cache only costs a question asked again."""

import django.db.models.deletion
from django.db import migrations, models


def drop_shared_replies(apps, schema_editor):
    apps.get_model("judgments", "LLMReply").objects.all().delete()


class Migration(migrations.Migration):

    dependencies = [
        ("judgments", "0027_llm_endpoint_limits_and_job_chunks"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="llmreply", name="llm_reply_once"),
        migrations.RunPython(drop_shared_replies, migrations.RunPython.noop),
        migrations.AddField(
            model_name="llmreply",
            name="project",
            field=models.ForeignKey(default=None, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                    to="judgments.project"),
            preserve_default=False,
        ),
        migrations.AddConstraint(
            model_name="llmreply",
            constraint=models.UniqueConstraint(fields=("project", "model", "prompt_version", "texts_sha256"),
                                               name="llm_reply_once_per_project"),
        ),
    ]
