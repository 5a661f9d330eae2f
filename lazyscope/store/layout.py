"""Every name in a run directory and in a comparison directory: the one place they are
declared (the writers, the readers, the views and ``--force`` all take them from here).

A run directory (``lazyscope trace --out RUN``)::

    meta.json            what ran and how it ended          (store.writer)
    steps.bin            one record per step                (store.records)
    events.bin           one record per event
    intern.jsonl         frames, stacks, payloads, once each
    annotations.jsonl    what the program annotated per step
    steps.jsonl          schema 1's steps, events (read only)
    events.jsonl
    .lock                held by the trace writing the run  (store.lock)
    error.txt            the program's traceback, when it failed
    xla_debug.txt        PT_XLA_DEBUG's text (XLA; .old: the previous one)
    graphs/              each compiled graph's HLO (XLA)
    rank<N>/             the run of rank N of a multi-process run
    host<N>/             host N's part of a run at a URL (``--out gs://...``; store.remote)
    host<N>/upload.json  its uploader's heartbeat: rewritten while the trace runs (a launcher's
                         ranks each upload their own: host<N>/rank<R>/upload.json)
    host<N>/manifest.json  written last by each upload: the size and checksum of every record
                         file it uploaded (a reader takes the part only when they match)
    report.html          the HTML report                    (render.views)
    timeline.png, time_split.png, cumulative.png   the plots
    tensorboard/         TensorBoard scalars and the XProf profile (plugins/profile/...)
    trace.json           ``lazyscope export --format perfetto``

A comparison directory (``lazyscope compare --out DIR``): ``compare.json``, ``compare.png``,
``report.html`` and a run directory per policy (``DIR/<policy>/``, ``DIR/<backend>/<policy>/``).
"""

from __future__ import annotations

META_FILE = "meta.json"
STEPS_FILE = "steps.bin"
EVENTS_FILE = "events.bin"
INTERN_FILE = "intern.jsonl"
ANNOTATIONS_FILE = "annotations.jsonl"
V1_STEPS_FILE = "steps.jsonl"
V1_EVENTS_FILE = "events.jsonl"
LOCK_FILE = ".lock"
ERROR_FILE = "error.txt"
DEBUG_FILE = "xla_debug.txt"
#: the debug file a run replaced keeps its predecessor's text here
DEBUG_FILE_OLD = DEBUG_FILE + ".old"
#: written and removed to learn that a directory can be written
WRITE_TEST = ".lazyscope-write-test"
GRAPHS_DIR = "graphs"
#: the run directory of rank N of a multi-process run, inside the run's own directory
RANK_DIR = "rank{rank}"
#: host N's part of a run written to a URL by several hosts (a pod), inside the run
HOST_DIR = "host{host}"
#: in a host's part at a URL: its uploader's heartbeat (who uploads, how often, still or no more)
UPLOAD_FILE = "upload.json"
#: in a host's part at a URL, beside its heartbeat: what the last upload uploaded, written last
MANIFEST_FILE = "manifest.json"
REPORT_HTML = "report.html"
TIMELINE_PNG = "timeline.png"
TIME_SPLIT_PNG = "time_split.png"
CUMULATIVE_PNG = "cumulative.png"
TENSORBOARD_DIR = "tensorboard"
PERFETTO_JSON = "trace.json"
COMPARE_JSON = "compare.json"
COMPARE_PNG = "compare.png"

#: what lazyscope writes into a run directory (``--force`` replaces nothing else; any ``.png``
#: and ``.tmp`` file too)
RUN_FILES = frozenset({
    META_FILE, STEPS_FILE, EVENTS_FILE, INTERN_FILE, ANNOTATIONS_FILE, V1_STEPS_FILE,
    V1_EVENTS_FILE, LOCK_FILE, DEBUG_FILE, DEBUG_FILE_OLD, ERROR_FILE, REPORT_HTML, WRITE_TEST,
})
RUN_DIRS = frozenset({GRAPHS_DIR, TENSORBOARD_DIR})
