"""The domain: records, attempt identity, resource names, ids, timestamps, errors, retries, schedules and
occurrences, job definitions, filters; the ports the processes use (store, queue, signal bus); and the rules
that more than one process applies (dispatch, the attempt lifecycle, cancel routing). It imports none of the
other packages: they import it."""
