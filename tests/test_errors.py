"""``ipfi_cli.errors``: the line a user sees of an error."""

from __future__ import annotations

from ipfi_cli.errors import InputError, ModelError, first_line


def test_ipfis_own_message_is_one_line_whole_whatever_the_data_it_quotes():
    """A header field may hold a line break (a quoted "a<LF>b" or "a<CR>b"); messages that list the
    columns quote them as they are, and the line stopped there: "the columns are: a", the rest of
    the list and any hint lost. The line shows the break escaped instead and goes on."""
    error = InputError("no column 'nope' (the --target); the columns are: a\nb, c\rd, x1, y (use --target)",
                       source="f.csv")
    assert first_line(error) == ("f.csv: no column 'nope' (the --target); the columns are: a\\nb, c\\rd, x1, y "
                                 "(use --target)")
    assert first_line(InputError("got 'x'", source="dir\nname.csv", row=3)) == "dir\\nname.csv: row 3: got 'x'"
    assert first_line(ModelError("")) == "ModelError"


def test_another_librarys_message_keeps_its_first_line():
    assert first_line(ValueError("Found unknown categories ['XX']\nmore detail")) == \
        "Found unknown categories ['XX']"
    assert first_line(KeyError("")) == "''"
    assert first_line(RuntimeError()) == "RuntimeError"
