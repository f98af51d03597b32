"""The one way every form of the app is drawn (settings.FORM_RENDERER)."""

from django.forms.renderers import TemplatesSetting


class FormRenderer(TemplatesSetting):
    """Each field is one block, its label, input, help text and errors together (templates/forms/field.html),
    so that a grid of fields never puts a label and its input in different cells; `{{ form }}`,
    `form.as_div` and `field.as_field_group` all draw it."""

    form_template_name = "forms/form.html"
    field_template_name = "forms/field.html"
