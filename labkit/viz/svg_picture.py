"""A picture written directly as SVG: shown inline in a notebook (kept when it is saved) and
written to a file with ``save``. Subclasses give ``svg()``."""


class SvgPicture:
    def svg(self):
        raise NotImplementedError

    def _repr_svg_(self):
        return self.svg()

    def save(self, path):
        """Write the SVG to ``path``; returns ``path``."""
        with open(path, "w") as f:
            f.write(self.svg())
        return path
