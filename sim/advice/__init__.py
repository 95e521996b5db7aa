"""The lease advisor (`sim.advise`, `python -m sim advise`): its inputs and options, the candidate
settings and their risk, the shortlist, the sensitivity and evidence, the advice in words, on a
page and in a queue's own settings (queue_terms, queue_terms_pg, queue_facts)."""
