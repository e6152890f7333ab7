"""Workers in any language, over HTTP (docs/http-workers.md): a claim hands each job
with a lease, and every write about that job names it. The lease fences those writes
as a Python worker's claim token does: once the job was rescued, handed to another
worker or ended, a write with the old lease is refused and changes nothing.
``leases`` is the lease's form, ``service`` the claims and fenced writes that
``JobQueue.http_workers`` serves to api/work_routes.py."""
