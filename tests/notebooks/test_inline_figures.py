"""In a real kernel, every inline figure carries its measured text (core.figure_text.register_inline), the
kernel's first one too, however it is shown: by ``plt.show()`` inside the cell or at the cell's end."""

import nbformat
import papermill
import pytest

from bertology_utils.core.figure_text import TEXT_KEY


@pytest.mark.slow
@pytest.mark.notebook
def test_every_inline_figure_carries_its_text_the_first_one_too(tmp_path):
    cells = [
        "import matplotlib.pyplot as plt\nimport bertology_utils.core.figures",
        "plt.plot([0, 1], [1, 0])\nplt.title('first, by plt.show()')\nplt.show()",
        "plt.plot([0, 1], [0, 1])\nplt.title('second, at the end of the cell')",
    ]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    source, executed = tmp_path / "figures.ipynb", tmp_path / "executed.ipynb"
    nbformat.write(notebook, source)
    papermill.execute_notebook(str(source), str(executed), kernel_name="python3", progress_bar=False)
    figures = [
        output
        for cell in nbformat.read(executed, as_version=4).cells
        for output in cell.outputs
        if "image/png" in output.get("data", {})
    ]
    assert len(figures) == 2
    titles = [{box[-1] for box in figure.metadata["image/png"][TEXT_KEY]["boxes"]} for figure in figures]
    assert "first, by plt.show()" in titles[0] and "second, at the end of the cell" in titles[1]
