"""Nightly work: job kinds, the durable run loop, the cron scheduler and the jobs service."""
