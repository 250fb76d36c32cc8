"""roofs"""
