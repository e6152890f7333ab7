"""Schedules: periodic jobs as data (docs/schedules.md). ``control`` holds the
changes made at run time (``jq.schedules``), ``runner`` the leader's enqueueing of
ticks. When a schedule ticks is jobqueue.model.schedule_timing; a schedule as users
read it, jobqueue.model.schedules."""
