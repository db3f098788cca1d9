"""Job backends behind one Protocol (see ``base``)."""
