from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("judgments", "0011_round_totals")]

    operations = [
        migrations.AddField(
            model_name="querylog",
            name="sha256",
            field=models.CharField(blank=True, db_index=True, max_length=64),
        ),
    ]
