"""Reports: figures, paper-vs-emulator tables and the claims ledger, from the results database only."""
