"""The cut: where a compaction's kept part starts and what the summarised range holds ("the compaction plan",
pi's ``prepareCompaction``), read without decoding the range's lines (:mod:`ctxd.compaction.cut.rows`)."""
