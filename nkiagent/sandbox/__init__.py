"""The sandbox: a transport that runs untrusted kernel code in a fenced worker process and brings its answer back.

It sits below the backends and the verifier, its clients. :mod:`.launch` starts a worker (scrubbed
environment, limits, timeout, process-group kill) — forked by :mod:`.zygote`, a launcher with Python,
NumPy and the emulator already loaded that never runs kernel code —, :mod:`.worker` is the process itself,
:mod:`.guard` and :mod:`.policy` fence kernel code inside it, :mod:`.real` loads AWS's own ``nki``
in the emulator's place when asked, and :mod:`.arrays` draws a case's inputs and moves arrays
across the boundary as ``.npy`` files. It decides nothing: verdicts are the verifier's.
"""
