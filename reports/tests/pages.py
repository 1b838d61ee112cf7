"""Reading the generated pages back: tables by id with each cell's text and attributes, the
elements that carry a data-value, and whether an image has anything drawn on it."""

import io
import pathlib
from html.parser import HTMLParser

import matplotlib.image


class Cell:
    def __init__(self, tag, attrs):
        self.tag = tag
        self.attrs = dict(attrs)
        self.text = ""
        self.links = []  # href of every <a> inside

    @property
    def value(self):
        """The exact stored number of a measured cell (data-value), None when not measured."""
        raw = self.attrs.get("data-value")
        return None if raw in (None, "") else float(raw)

    def __repr__(self):
        return f"Cell({self.text!r}, {self.attrs})"


class Page(HTMLParser):
    """tables: {id or class: [[Cell, ...] per body row]}; valued: every element with a
    data-value attribute; images: every <img src>; text: the page's visible text."""

    def __init__(self, path):
        super().__init__(convert_charrefs=True)
        self.path = pathlib.Path(path)
        self.tables = {}
        self.valued = []
        self.images = []
        self.ids = set()
        self.chunks = []
        self._tables = []  # stack of (name, rows)
        self._row = None
        self._cells = []  # open cells and valued elements collecting text
        self._in_head = False
        self.feed(self.path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.ids.add(attributes["id"])
        if tag == "table":
            name = attributes.get("id") or attributes.get("class", "").split(" ")[0]
            self._tables.append((name, self.tables.setdefault(name, [])))
        elif tag == "tr" and self._tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            cell = Cell(tag, attrs)
            self._row.append(cell)
            self._cells.append(cell)
        elif "data-value" in attributes:
            cell = Cell(tag, attrs)
            self.valued.append(cell)
            self._cells.append(cell)
        if tag == "img":
            self.images.append(attributes["src"])
        if tag == "a":
            for cell in self._cells:
                cell.links.append(attributes.get("href", ""))
        if tag == "head":
            self._in_head = True

    def handle_endtag(self, tag):
        if tag == "head":
            self._in_head = False
        if tag in ("td", "th") and self._cells and self._cells[-1].tag == tag:
            cell = self._cells.pop()
            if "data-value" in cell.attrs:
                self.valued.append(cell)
        elif self._cells and self._cells[-1].tag == tag and tag not in ("td", "th"):
            self._cells.pop()
        elif tag == "tr" and self._row is not None:
            if self._row and any(c.tag == "td" for c in self._row):
                self._tables[-1][1].append(self._row)
            self._row = None
        elif tag == "table" and self._tables:
            self._tables.pop()

    def handle_data(self, data):
        if not self._in_head:
            self.chunks.append(data)
        for cell in self._cells:
            # Chunks between tags are words apart (<dt>owner</dt><dd>x</dd> reads "owner x").
            cell.text += " " + data

    @property
    def text(self):
        return " ".join(" ".join(self.chunks).split())

    def rows(self, name):
        """Body rows of a table as lists of Cell, with whitespace-collapsed text."""
        rows = self.tables.get(name, [])
        for row in rows:
            for cell in row:
                cell.text = " ".join(cell.text.split())
        return rows


def non_blank(png_bytes_or_path):
    """True when more than 0.5 % of the pixels differ from the background colour."""
    source = png_bytes_or_path
    if isinstance(source, bytes):
        source = io.BytesIO(source)
    pixels = matplotlib.image.imread(source, format="png")
    flat = pixels.reshape(-1, pixels.shape[-1])
    background = flat[0]
    differing = (abs(flat - background).max(axis=1) > 0.05).mean()
    return differing > 0.005
