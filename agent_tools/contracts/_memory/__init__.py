"""Memory: the tools' contracts (``contract``), the settings section (``settings``), the ranking
(``scoring``) and the text the model reads (``format``)."""
