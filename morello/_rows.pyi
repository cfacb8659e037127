"""Type stub for morello._rows: the row algebra of a page's new boxes has no Python API
(its functions are cimported by morello._pages and morello._persist)."""
