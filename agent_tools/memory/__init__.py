"""Pure helpers behind the memory engine and the saved-result readers.

Nothing here does I/O: scoring and recency (:mod:`.scoring`), ages and the text the model reads
(:mod:`.format`), the line view and regex search of saved results (:mod:`.readers`) and the small path
language of ``query_tool_result`` (:mod:`.jsonpath`).
"""
