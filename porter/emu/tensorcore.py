"""(filled in later)"""
