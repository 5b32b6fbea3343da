"""The sandbox: a transport that runs untrusted kernel code in a fenced worker process and brings its answer back.

Below the backends and the verifier, which are its only clients: :mod:`.launch` starts a worker
(scrubbed environment, limits, timeout, process-group kill), :mod:`.worker` is the process itself,
:mod:`.guard` and :mod:`.policy` fence kernel code inside it, :mod:`.arrays` draws a case's inputs
and moves arrays across the boundary as ``.npy`` files. It decides nothing: verdicts are the
verifier's.
"""
