"""The README's Python examples run as written (one namespace, in order) and give what they claim."""

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_python_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert len(blocks) >= 3
    ns: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), ns)
    # the claims written next to the code
    assert abs(float(ns["samples"].order_parameters["m"].mean()) - 0.243) < 0.02
    assert ns["curve"].transition["order"] == "first" and 700 < ns["curve"].transition["P_c"] < 780
    assert ns["mean_V"].shape == (8, 8) and ns["cov_V"].shape == (8, 8)
