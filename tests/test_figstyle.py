"""bayesattn.figstyle.check_figure and the legend placement, on figures built so that each holds exactly one known
problem (or none): a legend put over a line by hand, the same legend in an empty corner, a 6 pt text, an axis
label pushed past the figure's edge, two texts on top of each other, and a legend that figstyle.legend must move
off the data. Each figure has fixed axes (no layout engine), so where its artists fall is set by the test alone."""

import warnings

import numpy as np
import pytest

from bayesattn import figstyle

plt = figstyle.pyplot()


def _figure(*, top: bool = False):
    """A 5 x 4 inch figure with one axes well inside it ('panel') and one line: along the bottom of the axes
    (y in [0, 0.2] of the range 0..1), or with ``top`` along its top (y in [0.93, 0.95])."""
    fig = plt.figure(figsize=(5, 4))
    ax = fig.add_axes([0.18, 0.15, 0.75, 0.72])
    x = np.linspace(0, 1, 50)
    y = 0.94 + 0.01 * np.sin(6 * x) if top else 0.1 + 0.08 * np.sin(6 * x)
    ax.plot(x, y, label="a line")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="x", ylabel="y", title="panel")
    return fig, ax


@pytest.fixture(autouse=True)
def _close_all():
    yield
    plt.close("all")


def test_a_clean_figure_has_no_problem():
    fig, _ = _figure()
    assert figstyle.check_figure(fig) == []


def test_legend_over_the_line_is_reported_and_in_an_empty_corner_is_not():
    fig, ax = _figure()
    ax.legend(loc="lower center")  # on the line along the bottom
    (problem,) = figstyle.check_figure(fig)
    assert problem.startswith("legend 'a line'... of axes 'panel' covers ")
    assert problem.endswith(" drawn data point(s) of axes 'panel'")
    assert int(problem.split(" covers ")[1].split()[0]) > 0
    ax.legend(loc="upper right")  # the same legend where there is no data
    assert figstyle.check_figure(fig) == []


def test_text_box_over_the_line_is_reported_unless_it_labels_the_data():
    fig, ax = _figure()
    t = ax.text(0.5, 0.1, "over the line", ha="center", va="center")
    (problem,) = figstyle.check_figure(fig)
    assert problem.startswith("text 'over the line' in axes 'panel' covers ")
    t.set_gid(figstyle.LABEL_GID)  # a label of a data point, on purpose
    assert figstyle.check_figure(fig) == []


def test_small_text_is_reported():
    fig, ax = _figure()
    ax.text(0.5, 0.6, "six points", fontsize=6, ha="center")
    assert figstyle.check_figure(fig) == [f"text below {figstyle.MIN_FONT:g} pt: 'six points' (6 pt)"]
    ax.texts[0].set_fontsize(figstyle.MIN_FONT)
    assert figstyle.check_figure(fig) == []


def test_label_past_the_figure_edge_is_reported():
    fig, ax = _figure()
    ax.yaxis.labelpad = 200  # the y label pushed left, out of the figure
    assert figstyle.check_figure(fig) == ["y-axis label of axes 'panel' is cut by the figure's edge"]


def test_overlapping_texts_are_reported():
    fig, ax = _figure()
    fig.text(0.5, 0.95, "first caption", ha="center")
    fig.text(0.52, 0.95, "second caption", ha="center")
    (problem,) = figstyle.check_figure(fig)
    assert problem in (
        "figure text 'first caption' overlaps figure text 'second caption'",
        "figure text 'second caption' overlaps figure text 'first caption'",
    )


def test_figstyle_legend_is_placed_off_the_data():
    # the line runs along the top: the upper corners (a plain legend's usual place) hold data
    fig, ax = _figure(top=True)
    ax.legend(loc="upper right")
    assert len(figstyle.check_figure(fig)) == 1  # there, it covers the line
    leg = figstyle.legend(ax)
    figstyle.place(fig)
    assert leg._loc in (3, 4, 10)  # lower left, lower right, center (matplotlib's location codes)
    assert figstyle.check_figure(fig) == []


def test_note_is_placed_off_the_data_and_outside_when_no_corner_is_free():
    fig, ax = _figure()
    figstyle.note(ax, "a note")
    figstyle.place(fig)
    assert figstyle.check_figure(fig) == []
    # data everywhere inside the axes: the note goes outside, on the right
    fig, ax = _figure()
    xx, yy = np.meshgrid(np.linspace(0, 1, 30), np.linspace(0, 1, 30))
    ax.plot(xx.ravel(), yy.ravel(), ".", ms=1)
    box = figstyle.note(ax, "a note")
    figstyle.place(fig)
    r = figstyle.laid_out_renderer(fig)
    assert box.get_window_extent(r).x0 > ax.get_window_extent().x1


def test_save_raises_when_strict_and_warns_otherwise(tmp_path, monkeypatch):
    for strict in (True, False):
        fig, ax = _figure()
        ax.legend(loc="lower center")
        monkeypatch.setattr(figstyle, "STRICT", strict)
        if strict:
            with pytest.raises(figstyle.FigureCheckError, match="figure bad.png: legend 'a line'"):
                figstyle.save(fig, tmp_path / "bad.png")
        else:
            with pytest.warns(UserWarning, match="figure bad.png: legend 'a line'"):
                figstyle.save(fig, tmp_path / "bad.png")
    monkeypatch.setattr(figstyle, "STRICT", True)
    fig, ax = _figure()
    figstyle.legend(ax)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert figstyle.save(fig, tmp_path / "good.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "values, expected",
    [
        ([20, 50, 300, 4000], [100, 1000]),  # two decades in range: the decades
        ([500, 650, 800, 900, 925, 950, 975, 1000, 1250, 2000, 2600, 3000, 4000, 6500], [500, 1000, 2000, 5000]),
        ([30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40], [30, 32, 34, 36, 38, 40]),  # no 1-2-5 number: thinned
    ],
)
def test_log_x_axis_labels_do_not_crowd(values, expected):
    """The dense P grid of the T = 64 staircase (first row) once labelled every one of its 19 values; the labels are
    the decades, else the 1-2-5 numbers, else the values thinned, and no two drawn labels overlap."""
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.plot(values, np.linspace(0, 1, len(values)))
    figstyle.log_x_axis(ax, values)
    assert [float(t) for t in ax.get_xticks()] == pytest.approx(expected)
    fig.canvas.draw()
    boxes = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    assert all(not a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
