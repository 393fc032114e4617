"""The sections of the tier model, one module each; :mod:`gpufarm.config.model` gathers them."""
