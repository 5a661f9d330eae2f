"""Small torch_xla programs, one per way people run torch_xla (launch, a launcher's ranks,
SPMD, openxla dynamo, torch_xla.step / compile, eager mode). Each prints torch_xla's own
counts at its end (``COUNTS {...}``), so a test compares a traced run with an untraced one."""
