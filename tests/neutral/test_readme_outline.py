"""The README's outline (issue 39): at most 200 lines, its sections in one order, and links
that resolve. Reads text only (no framework import), so it runs on every stack."""
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
README = REPO / "README.md"
MAX_LINES = 200

#: the README's sections, in this order (heading prefixes; other sections may follow)
SECTIONS = (
    "## Methods by backend and stack",
    "## Install",
    "## Quickstart: Keras 3 with keras-rs",          # tests/test_readme_keras3.py runs it
    "## Use it in your TF-Ranking pipeline",         # tests/test_pipeline.py runs it
    "## Quickstart: Keras 3 on JAX or PyTorch",      # tests/neutral/test_neutral_readme.py
    "## Jobs",
    "## Results on MQ2008",
    "## Speed",
    "## Documentation",
)
#: the docs pages the Documentation section links to
DOCS_PAGES = ("docs/stacks.md", "docs/bad_input.md", "docs/interrupted_runs.md",
              "docs/speed.md", "docs/results.md", "docs/notes/gbdt_objective.md")
#: the stack and backend extras of setup.py, one pip line each
EXTRAS = ("tf215", "tf221", "keras3", "jax", "torch")
#: written by `make docs`, not tracked
BUILT = ("docs/api/index.html",)


def text() -> str:
    return README.read_text(encoding="utf-8")


def headings() -> list:
    return [line for line in text().splitlines() if line.startswith("## ")]


def section(prefix: str) -> str:
    """The text of the section whose heading starts with ``prefix``, up to the next one."""
    body = text().split("\n" + prefix, 1)[1]
    return body.split("\n## ", 1)[0]


def test_at_most_200_lines():
    assert len(text().splitlines()) <= MAX_LINES


def test_it_starts_with_make_demo_and_make_test():
    lines = text().splitlines()
    assert lines[0] == "# tfr_extensions" and lines[2] == "```bash"
    assert lines[3].startswith("make demo ") and lines[4].startswith("make test ")


def test_one_paragraph_says_what_it_is_before_the_first_section():
    intro = text().split("```\n", 2)[-1].split("\n## ", 1)[0].strip()
    assert intro and "\n\n" not in intro and not intro.startswith("#")


def test_sections_come_in_order():
    found = headings()
    positions = []
    for prefix in SECTIONS:
        matches = [i for i, heading in enumerate(found) if heading.startswith(prefix)]
        assert len(matches) == 1, (prefix, found)
        positions.append(matches[0])
    assert positions == sorted(positions), found


def test_methods_table_has_a_column_per_stack_and_backend():
    header = next(line for line in section(SECTIONS[0]).splitlines() if line.startswith("| method"))
    for column in ("TF-Ranking pipeline", "Keras 2", "Keras 3 on TensorFlow", "JAX", "PyTorch"):
        assert column in header


@pytest.mark.parametrize("extra", EXTRAS)
def test_install_has_a_pip_line_per_extra(extra):
    pattern = rf"pip install -e '\.\[{extra}\]' +-c stacks/{extra}\.txt"
    assert re.search(pattern, section("## Install")), pattern


def test_install_names_make_for_contributors():
    install = section("## Install")
    for target in ("make setup STACK=", "make test STACK=", "make docs"):
        assert target in install


@pytest.mark.parametrize("name,link", [("## Results on MQ2008", "docs/results.md"),
                                       ("## Speed", "docs/speed.md")])
def test_results_and_speed_each_have_one_table_a_machine_and_a_link(name, link):
    body = section(name)
    separators = [line for line in body.splitlines() if re.fullmatch(r"\|(---\|)+", line)]
    assert len(separators) == 1
    assert "vCPUs" in body and f"]({link})" in body


def test_documentation_links_every_docs_page_and_the_api_reference():
    body = section("## Documentation")
    for page in DOCS_PAGES + BUILT:
        assert f"]({page})" in body, page


def test_adding_a_loss_shows_the_spec_and_the_class():
    body = section("## Adding a loss")
    assert "@base.loss_function(" in body and "@registry.register" in body
    assert "def __init__" in body and "super().__init__(locals())" in body


@pytest.mark.parametrize("page", ["README.md"] + sorted(
    str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md")))
def test_relative_links_resolve(page):
    path = REPO / page
    for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        file = (path.parent / target.split("#", 1)[0]).resolve()
        if str(file.relative_to(REPO)) in BUILT:
            continue
        assert file.exists(), f"{page} links to {target}, which does not exist"
