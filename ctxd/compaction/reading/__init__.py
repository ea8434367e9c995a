"""What is read from a conversation without a model: one pass over its messages (:mod:`.facts`), the sentences
that are requests, constraints and decisions (:mod:`.mining`), the tasks it falls into (:mod:`.episodes`), what
commands and edits did (:mod:`.actions`, :mod:`.artifacts`, :mod:`.calls`, :mod:`.shell`), the agent's plan
documents and todo tools (:mod:`.agent_plans`) and the file lists (:mod:`.fileops`)."""
