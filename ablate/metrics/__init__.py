"""Read a trial's metrics from what its task already produces, with no shim in it (every form: ``app``,
``command``, and an ``fn`` task whose return value lacks the metric, :func:`ablate.trials.tasks.fn.metrics_of`).

Sources, looked for in this order unless ``task.metric_source`` names one:

1. ``return``: the value the ``@hydra.main`` function returned (a mapping, or a scalar taken as
   ``task.metric``), saved by :mod:`ablate.trials.tasks.hydra_callback` (an ``fn`` task's return value is
   this source too, looked at first by the ``fn`` form itself);
2. ``file``: the JSON object a command task wrote to ``$ABLATE_METRICS_FILE`` (or its ``metrics_file``);
3. ``csv``: a ``metrics.csv`` with a header row (Lightning's ``CSVLogger``, or any other: one column per
   metric, a ``step`` column when there is one);
4. ``tensorboard``: TensorBoard event files, read with TensorBoard's own ``EventAccumulator``
   (the ``tensorboard`` package: ``pip install 'hydra-ablate[tensorboard]'``);
5. ``json``: ``*.json`` (an object of numbers) or ``*.jsonl`` (one object per line) files: the newest
   that holds the metric (``eval_results.json`` of a Trainer-style script);
6. ``stdout``, ``stderr``: lines the script printed. With ``task.metric_pattern`` (a regular expression,
   or a list of them, with named groups: ``val loss (?P<val_loss>[0-9.eE+-]+)``; a group named ``step``
   gives the step), each group is a metric; without, ``key: value`` or ``key=value`` pairs anywhere in a line
   (:func:`ablate.metrics.lines.line_pairs`: ``epoch 2 val_acc: 0.80``, the last of a name per line). With a
   pattern, these two come first.

Files are looked for under the trial's run dir (``${hydra:runtime.output_dir}``), then among the
files the script wrote into its working dir (``<trial dir>/work``: a ``hydra.job.chdir=false`` app's
``metrics.json``; the mirror's links to the code snapshot are never read).

A metric logged at many steps is reduced by ``task.reduce``: ``last`` (default), ``min`` or ``max``.
The source, file, step, rule and the matched line (or CSV row, or JSON key) are returned with the
metrics and recorded in ``result.json``. When nothing matches, the error shows the lines that came
closest to the pattern.

A lower package: the trial (:mod:`ablate.trials.tasks`) and ``ablate audit`` (:mod:`ablate.audit`) both read
through it. One module per kind of source (:mod:`.files`, :mod:`.lines`), the series and its reduction
(:mod:`.series`), and the order the sources are looked in (:mod:`.collect`).
"""

from __future__ import annotations

from ablate.metrics.collect import REDUCE, SOURCES, collect
from ablate.metrics.files import (
    RETURN_FILE,
    SEEN_FILE,
    read_csv,
    read_csv_file,
    read_json,
    read_json_file,
    read_return,
    read_tensorboard,
)
from ablate.metrics.lines import closest_lines, compile_patterns, read_lines, read_stdout
from ablate.metrics.series import Series, flat_numbers, number, reduce_series

__all__ = ["REDUCE", "RETURN_FILE", "SEEN_FILE", "SOURCES", "Series", "closest_lines", "collect", "compile_patterns",
           "flat_numbers", "number", "read_csv", "read_csv_file", "read_json", "read_json_file", "read_lines",
           "read_return", "read_stdout", "read_tensorboard", "reduce_series"]
