"""The commands of the ``lazyscope`` group, one module each (as memray's), with what only
commands use: the console and progress lines (:mod:`.console`), the compare driver
(:mod:`.cases`), the TensorBoard server (:mod:`.tensorboard`).

:data:`COMMANDS` names each command's module; :mod:`lazyscope.cli` imports one only when it
runs (or when the group's help lists them), so ``lazyscope check`` never imports matplotlib,
the advisor or the notebook integration.
"""

#: command name -> "module:click command", in the order the help lists them
COMMANDS: dict[str, str] = {
    "trace": "lazyscope.commands.trace:trace_cmd",
    "report": "lazyscope.commands.report:report_cmd",
    "check": "lazyscope.commands.check:check_cmd",
    "watch": "lazyscope.commands.watch:watch_cmd",
    "diff": "lazyscope.commands.diff:diff_cmd",
    "export": "lazyscope.commands.export:export_cmd",
    "tensorboard": "lazyscope.commands.tensorboard:tensorboard_cmd",
    "compare": "lazyscope.commands.compare:compare_cmd",
    "advise": "lazyscope.commands.advise:advise_cmd",
    "scenarios": "lazyscope.commands.scenarios:scenarios_cmd",
}
