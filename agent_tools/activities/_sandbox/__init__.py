"""``exec_python``: the tool (:mod:`.tool`), the engine that runs a call's code (:mod:`.engine`), its
bubblewrap sandbox (:mod:`.isolation`) and the program that runs inside it (:mod:`.launcher`).

It imports none of them: :class:`~agent_tools.activities._services.Services` builds the engine, which imports
no activity module, while the tool imports the services.
"""
