"""The summarisers' former home, kept as an alias of :mod:`ctxd.compaction.summary` (their package since the
compaction folder was laid out by what it holds): ``from ctxd.compaction.summarizers import OfflineSummarizer``
still works. New code imports :mod:`ctxd.compaction.summary`."""

from __future__ import annotations

from ctxd.compaction.summary import __getattr__ as __getattr__
from ctxd.compaction.summary import create_summarizer as create_summarizer
