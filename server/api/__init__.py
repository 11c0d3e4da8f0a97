"""The public API: JobService and SearchService, their requests' checks, and the live feed."""
