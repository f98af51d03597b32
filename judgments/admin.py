from django.contrib import admin

from .models import Job, Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["kind", "project", "state", "progress_done", "progress_total", "created_at", "finished_at"]
    list_filter = ["state", "kind"]
    readonly_fields = ["uuid", "created_at", "started_at", "heartbeat_at", "finished_at", "worker"]
