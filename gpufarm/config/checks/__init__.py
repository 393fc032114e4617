"""The cross-field checks of a tier, one module per section; :mod:`gpufarm.config.validate` runs them."""
